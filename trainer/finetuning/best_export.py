"""The classification job's transformers folder (job_run.py): after the seeds, the chief
writes the best seed's best epoch (by the dev metric, as the reranker chooses) as
`{job output folder}/hf/`, a `*ForSequenceClassification` with the task's label names
(`trainer.release.classifier_export`); a GLUE run writes one per task, in the task's folder.

What cannot be exported (`classifier_export.check`) is found before the first seed and
recorded in results.json's `export` (`path` null, `skipped` the one-line reason) rather than
refused: fine-tuning still scores the model, which is what it is for. An earlier run's export
in that folder is then deleted, so that `hf/` never holds another run's model beside this
run's results.

The label names are the job's, in id order (`label_names`): the names its training file or
dataset gives, and for GLUE's tasks whose files label 0 / 1 the dataset's class names
(nyu-mll/glue's ClassLabel: SST-2's `negative` / `positive`).

Example:
    >>> export = BestSeed(source, info, job, max_length=128)      # before the first seed
    >>> export.offer(record, models.model)                        # after each seed
    >>> export.finish(runtime, models.model, document)            # after the last
"""

from __future__ import annotations

import contextlib

from common import fs
from trainer.finetuning import packing, protocol, runners
from trainer.release import classifier_export
from trainer.tasks import glue, task_kinds

EXPORT_DIR = "hf"


def problem_type(job) -> str:
    """transformers' `problem_type` of the job's head. Its names for the two kinds this loop
    fits: `single_label_classification` for named classes (cross-entropy), and for one
    number under squared error "regression", the regression kind's own name, asked of its
    record (a kind of another loss would be a new name that transformers refuses)."""
    kind = task_kinds.get(job.task_type)
    return classifier_export.SINGLE_LABEL if kind.named_classes else kind.name


def label_names(job) -> tuple | None:
    """The names of the job's classes in id order (None for a regression): GLUE's digit
    labels as the dataset names its classes, every other as the task's files give them."""
    if job.names is None:
        return None
    task = glue.TASKS.get(job.extra.get("glue", ""))
    if task and task.hf_labels and all(name.isdigit() for name in job.names):
        return tuple(task.hf_labels[int(name)] for name in job.names)
    return tuple(str(name) for name in job.names)


class BestSeed:
    """Keeps the best seed's weights and writes them as the job's transformers folder."""

    def __init__(self, source, info, job, max_length: int):
        self.source, self.info, self.max_length = source, info, max_length
        self.folder = fs.join(job.output_dir, EXPORT_DIR)
        self.pooling, self.metric = job.settings.pooling, job.recipe.metric
        self.names = label_names(job)
        self.labels = classifier_export.label_config(self.names, problem_type(job))
        self.frame = packing.framing(source)
        args = (source, info, self.pooling, max_length, self.frame)
        self.skipped, self.tokenizer_note = classifier_export.check(*args)
        self.best = (None, None, None)  # (dev score, seed, weights)

    def notes(self) -> list[str]:
        """What the chief says before the first seed: why there will be no export, or how its
        tokenizer differs from the run's."""
        if self.skipped:
            return [f"note: {self.skipped}"]
        return [f"note: {self.tokenizer_note}"] if self.tokenizer_note else []

    def offer(self, record: dict, model) -> None:
        """After a seed (`protocol.run_seed` left its best epoch in `model`): kept if its dev
        score beats the best so far. Every process keeps them (a pod's processes compute the
        same scores, so keep the same seed): `finish` sets them on every process."""
        if self.skipped or record.get("diverged"):
            return
        score = record["dev"][self.metric]
        if protocol.better(score, self.best[0], self.metric):
            self.best = (score, record["seed"], model.get_weights())

    def finish(self, runtime, model, document: dict) -> None:
        """results.json's `export`; the chief writes the folder (or deletes an earlier run's
        where there is none) and says where it is."""
        _, seed, weights = self.best
        reason = self.skipped or (None if weights else "every seed diverged: no weights")
        if reason:
            document["export"] = {"path": None, "skipped": reason}
            if runtime.chief:
                self._remove_earlier()
                print(reason, flush=True)
            return
        document["export"] = {
            "path": self.folder,
            "seed": seed,
            "architecture": classifier_export.architecture(self.source.family),
            "labels": list(self.names) if self.names else None,
            "problem_type": self.labels["problem_type"],
            "predict": classifier_export.predict(self.names),
            "tokenizer": self.tokenizer_note or None,
        }
        model.set_weights(weights)  # on every process: a pod's variables are global arrays
        if runtime.chief:
            args = (self.labels, self.pooling, self.max_length, self.folder, self.frame)
            with _one_process():
                classifier_export.export(self.source, self.info, model, *args)
            print(f"transformers model (seed {seed}'s best epoch): {self.folder}", flush=True)

    def _remove_earlier(self) -> None:
        """An earlier run's export (it has a config.json; anything else is left alone)."""
        if fs.exists(fs.join(self.folder, "config.json")):
            fs.delete_tree(self.folder)


@contextlib.contextmanager
def _one_process():
    """Keras' distribution off while the chief alone builds the export's masked LM (its
    weight names): under a pod's DataParallel its new variables would be global arrays, whose
    placement the other processes never join (the chief waited for ever, 2-process CPU pod).
    Reading the fine-tuned model's replicated weights needs no other process."""
    import keras

    distribution = keras.distribution.distribution()
    keras.distribution.set_distribution(None)
    try:
        yield
    finally:
        keras.distribution.set_distribution(distribution)


def check_folder(job) -> None:
    """Before any work: the job's `hf/` must be empty or an earlier export, which the export
    replaces whole (`folder_swap` would refuse it only after the training). A kind with its
    own loop (`runners`) checks its own folders."""
    from common.errors import UserError

    if runners.of(job.task_type) is not None:
        return
    folder = fs.join(job.output_dir, EXPORT_DIR)
    if fs.files_under(folder) and not fs.exists(fs.join(folder, "config.json")):
        raise UserError(f"{folder} holds files but no config.json: the export would replace it")
