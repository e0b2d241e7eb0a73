"""Fine-tunes a pretrained model on a labelled task and scores it: does pretraining pay off?

    python -m trainer.finetune --model runs/tiny --train train.jsonl --dev dev.jsonl \
        --output_dir finetune/tiny
    python -m trainer.finetune --model runs/tiny --task glue --glue_dir glue_data \
        --output_dir finetune/glue --card exports/tiny

`--model` is anything `trainer.models.model_source.resolve` accepts (a run folder: its newest
checkpoint; one `.weights.h5`; our keras-hub export). The family's keras-hub TextClassifier
is built on its backbone (`--from_scratch`: on random weights, the reference), texts are
tokenized with the model's own tokenizer files and packed the family's way
(`trainer/finetuning/packing.py`), and each of `--seeds` fine-tunes, keeps its best epoch on
dev and scores test (`trainer/finetuning/protocol.py`). `--task` runs GLUE's tasks from their
own layout with their own recipes (`trainer/finetuning/glue.py`). The table is printed and
`{output_dir}/results.json` written (per GLUE task `{output_dir}/TASK/results.json`);
`--card` adds the scores to an export's model cards; docs/finetuning.md states the protocol.

Example:
    >>> main(["--model", "runs/tiny", "--train", "t.csv", "--dev", "d.csv",
    ...       "--text_column", "sentence", "--output_dir", "out", "--seeds", "1"])
    0
"""

from __future__ import annotations

import dataclasses
import types

from common import flags, fs
from common.errors import UserError, run_cli
from common.flags import flag
from trainer.finetuning import (
    card_scores,
    datasets,
    glue,
    interruption,
    job_run,
    jobs,
    metrics,
    output_folder,
    pooling,
    pretraining,
    protocol,
    recipes,
    results,
    task_kinds,
)
from trainer.models import model_source
from trainer.run_folder import run_dir
from trainer.run_folder.lock_flags import LockFlags
from trainer.startup import keras_backend
from trainer.startup.device_flags import DeviceFlags

ALL_METRICS = (*metrics.CLASSIFICATION, *metrics.REGRESSION)
# cramming's one recipe (results.RECIPE_SOURCE), for a task of the user's own files with a
# base or large model (tiny and small: trainer/finetuning/recipes.py).
DEFAULT_RECIPE = recipes.GLUE_RECIPE


@dataclasses.dataclass
class FinetuneFlags(DeviceFlags, LockFlags):  # the trainer's --strategy, --takeover_lock, ...
    model: str = flag(
        "The pretrained model: a training run folder (newest checkpoint), a "
        ".weights.h5 checkpoint or our keras-hub export.",
        required=True,
    )
    output_dir: str = flag("Where results.json and the TensorBoard logs go.", required=True)
    train: str = flag(
        "Training examples: a .jsonl, .csv or .tsv file, or a Hugging Face "
        "save_to_disk folder of one split (required without --task)."
    )
    dev: str = flag("Development examples (selection of the best epoch; required without --task).")
    test: str = flag(
        "Test examples, scored once with the selected epoch's weights (without labels: "
        "predicted into OUTPUT_DIR/predictions/, not scored)."
    )
    hf_dataset: str = flag(
        "A Hugging Face dataset by name (e.g. stanfordnlp/imdb), read through "
        "datasets.load_dataset: from the Hub, or offline from the local datasets cache "
        "(HF_DATASETS_CACHE); or a DatasetDict.save_to_disk folder. Instead of "
        "--train/--dev/--test, as prepare's --hf_dataset."
    )
    hf_config: str = flag("The --hf_dataset's configuration (subset), e.g. sst2 of glue.")
    hf_revision: str = flag(
        "A branch, tag or commit of the --hf_dataset's repository (of nyu-mll/glue for --task "
        "without --glue_dir); default: its main branch. The commit used is recorded."
    )
    train_split: str = flag("The --hf_dataset's split to train on; default train.")
    dev_split: str = flag(
        "The --hf_dataset's split that selects the epoch; default validation (else dev, valid)."
    )
    test_split: str = flag(
        "The --hf_dataset's split scored once at the end; default test where it has labels; "
        "none: no test."
    )
    task: str = flag(
        "A GLUE task with its own columns, metrics and recipe, read from --glue_dir or, "
        "without it, nyu-mll/glue by name; or glue: the 8 tasks (no WNLI) and the GLUE score.",
        choices=glue.NAMES,
    )
    glue_dir: str = flag(
        "GLUE's download (CoLA/train.tsv, MNLI/dev_matched.tsv, ...) or "
        "save_to_disk folders of nyu-mll/glue configs (cola/train, ...); "
        "default: nyu-mll/glue by name."
    )
    mnli_start: bool = flag(
        "With --task glue: RTE, MRPC and STS-B start from the backbone "
        "of MNLI's best seed, as MosaicBERT does.",
        False,
    )
    card: str = flag(
        "An export (trainer.export's output_dir, or one of its keras-hub/ or "
        "hf/ folders) whose model card(s) get the dev scores in model-index."
    )
    input_format: str = flag(
        "File format; default: hf for a folder, else by extension.", choices=datasets.FORMATS
    )
    text_column: str = flag("The column of the (first) text.", "text")
    text_pair_column: str = flag("The column of the second text (a text-pair task).")
    label_column: str = flag("The column of the label.", "label")
    task_type: str = flag(
        "classification (labels named in train) or regression (a number).",
        task_kinds.CLASSIFICATION.name,
        choices=task_kinds.NAMES,
    )
    metric: str = flag(
        "The dev score that selects the best epoch; default accuracy for "
        "classification, spearman for regression (a GLUE task: its own).",
        choices=ALL_METRICS,
    )
    max_length: int = flag(
        "Tokens per example, special tokens included; longer ones are "
        "truncated and counted. Default: 128, or the model's positions "
        "if fewer.",
        minimum=8,
    )
    epochs: int = flag(
        "Epochs per seed. Default: by the model's size (tiny, small: 10), else 5 or a GLUE "
        "task's own.",
        minimum=1,
    )
    batch_size: int = flag(
        "Examples per step, the global batch: split over the replicas (--cpu_replicas, GPUs, "
        "TPU cores), so a multiple of them. Default: 16, a GLUE task's own.",
        minimum=1,
    )
    learning_rate: str = flag(
        "Peak learning rate, or auto: one seed at each rate of a small grid around the "
        "default, then every seed at the best on dev. Default: by the model's size ("
        + ", ".join(f"{n} {r:g}" for n, (r, _) in recipes.SIZE_RECIPES.items())
        + "), else 4e-5 or a GLUE task's own."
    )
    pooling: str = flag(
        "What the classifier's head reads: cls (the first token) or mean (the mean of the "
        "non-padding tokens). Default: by the model's size (tiny, small: mean), else cls.",
        choices=pooling.CHOICES,
    )
    warmup_ratio: float = flag(
        "Share of the steps spent warming up linearly.", 0.1, minimum=0.0, maximum=1.0
    )
    weight_decay: float = flag(
        "AdamW weight decay (not on biases and LayerNorm).", 0.01, minimum=0.0
    )
    seeds: str = flag(
        "Comma-separated seeds, one fine-tuning each. Default: 1,2,3, a GLUE "
        "task's own (5 on RTE, MRPC, STS-B; 1 on MNLI)."
    )
    from_scratch: bool = flag(
        "Same architecture, random weights: the reference that shows what pretraining bought.",
        False,
    )
    jit_compile: str = flag(
        "XLA-compile the step: auto = yes on JAX and on accelerators, "
        "no for TensorFlow on a CPU (the compile outlasts a short "
        "fine-tune, and fails under MirroredStrategy over CPU devices).",
        "auto",
        choices=("auto", "true", "false"),
    )
    backend: str = flag(
        "Keras backend; default KERAS_BACKEND, else tensorflow.", choices=keras_backend.BACKENDS
    )

    def __post_init__(self):
        problem = flags.out_of_bounds(FinetuneFlags, self)
        if problem:
            raise ValueError(problem)
        self.learning_rate = recipes.parse_rate(self.learning_rate)
        self.check_devices()
        self.seed_list(DEFAULT_RECIPE.seeds)  # raises for a malformed list
        self._check_sources()
        if self.task:
            return
        kind = task_kinds.get(self.task_type)
        self.metric = self.metric or kind.default_metric
        wanted = kind.metrics(2)  # any number of classes: f1 is reported for two
        if self.metric not in wanted:
            raise ValueError(
                f"--metric {self.metric} does not score a {self.task_type} task "
                f"(choose one of {', '.join(wanted)})"
            )

    def _check_sources(self) -> None:
        """Either --task (with or without --glue_dir), --hf_dataset, or --train and --dev: never
        a mix."""
        self._check_dataset()
        if self.mnli_start and self.task != "glue":
            raise ValueError("--mnli_start needs --task glue (MNLI is fine-tuned first)")
        if self.card and self.from_scratch:
            raise ValueError(
                "--card with --from_scratch would put random weights' scores "
                "on the pretrained model's card"
            )
        if not self.task:
            if self.glue_dir:
                raise ValueError("--glue_dir needs --task")
            if not (self.hf_dataset or (self.train and self.dev)):
                raise ValueError("--train and --dev are required (or --hf_dataset, or --task)")
            return
        if self.glue_dir and self.hf_revision:
            raise ValueError("--hf_revision names a revision of nyu-mll/glue: not with --glue_dir")
        given = [
            f"--{n}"
            for n in ("train", "dev", "test", "metric", "text_pair_column")
            if getattr(self, n)
        ]
        if given:
            raise ValueError(
                f"--task brings its own files, columns and metric: drop {', '.join(given)}"
            )

    def _check_dataset(self) -> None:
        """--hf_dataset replaces --train/--dev/--test; its split and config flags need it."""
        if self.hf_dataset:
            clash = [
                f"--{n}"
                for n in ("train", "dev", "test", "task", "glue_dir", "input_format")
                if getattr(self, n)
            ]
            if clash:
                raise ValueError(f"--hf_dataset names the data: drop {', '.join(clash)}")
            self._check_saved_folder()
            return
        lonely = [
            f"--{n}"
            for n in ("hf_config", "train_split", "dev_split", "test_split")
            if getattr(self, n)
        ]
        if self.hf_revision and not self.task:
            lonely.append("--hf_revision")
        if lonely:
            raise ValueError(f"{', '.join(lonely)} need(s) --hf_dataset")

    def _check_saved_folder(self) -> None:
        """A save_to_disk folder holds one configuration at one revision, already chosen
        when it was saved: --hf_config/--hf_revision cannot select anything there."""
        from trainer.finetuning import hub

        given = [f"--{n}" for n in ("hf_config", "hf_revision") if getattr(self, n)]
        if given and hub.is_saved_folder(self.hf_dataset):
            raise ValueError(
                f"--hf_dataset {self.hf_dataset} is a save_to_disk folder: its configuration "
                f"and revision were fixed when it was saved; drop {', '.join(given)}"
            )

    def seed_list(self, default=DEFAULT_RECIPE.seeds) -> list[int]:
        if self.seeds is None:
            return list(default)
        try:
            seeds = [int(s) for s in self.seeds.split(",") if s.strip()]
        except ValueError:
            raise ValueError(
                f"--seeds must be comma-separated integers, not {self.seeds!r}"
            ) from None
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"--seeds must name at least one seed, each once: {self.seeds!r}")
        return seeds

    def spec(self) -> datasets.TaskSpec:
        return datasets.TaskSpec(
            self.task_type, self.text_column, self.text_pair_column, self.label_column
        )

    def recipe(self, metric: str, default: glue.Recipe = DEFAULT_RECIPE) -> protocol.Recipe:
        """The flags where given, else `default` (the model size's, cramming's, or a GLUE
        task's own); with --learning_rate auto, the default rate is the grid's centre."""
        given = isinstance(self.learning_rate, float)
        return protocol.Recipe(
            self.epochs or default.epochs,
            self.batch_size or default.batch_size,
            self.learning_rate if given else default.learning_rate,
            self.warmup_ratio,
            self.weight_decay,
            metric,
        )


def resolve_model(path: str):
    source = model_source.resolve(path)
    if source.tokenizer_dir is None:
        raise model_source.ModelNotFoundError(
            f"{path} has no {run_dir.TOKENIZER_DIR}/ folder: cannot tokenize the text"
        )
    return source


def finetune(config: FinetuneFlags) -> dict | None:
    """Runs the whole protocol; returns the results document (also written and printed;
    for --task glue the summary of every task and the GLUE score), or None on a process of
    a JAX pod other than process 0 (it wrote and printed nothing)."""
    from trainer.finetuning.classifier import PretrainedBackbone
    from trainer.run_folder import folder_lock

    source = resolve_model(config.model)
    size = recipes.model_size(source.run_config)
    tasks = jobs.glue_jobs(config, size[0]) if config.task else [jobs.own_job(config, size[0])]
    pooled = recipes.pooling(config.pooling, size[0])
    for job in tasks:
        job.extra_protocol["recipe_by_size"] = recipes.source_note(*size)
        job.extra_protocol["pooling"] = pooled
    cards = card_scores.writable(card_scores.readmes(config.card)) if config.card else []
    runtime = devices(config, tasks)  # before any model: TensorFlow splits an unused CPU only
    with folder_lock.held(config, runtime.chief), interruption.watching(runtime) as watch:
        backbone = PretrainedBackbone(source, config.from_scratch, pooled)
        pretrained = pretraining.pretraining_facts(source)  # before training: fails fast
        if pretrained["warning"] and not config.from_scratch:
            job_run.say(runtime, f"warning: {pretrained['warning']}")
        if runtime.chief:
            output_folder.clear_earlier_run(config.output_dir, [job.output_dir for job in tasks])
        if config.task == "glue":
            document = glue_run(config, runtime, source, backbone, pretrained, tasks, watch)
        else:
            document = job_run.run_job(
                config, runtime, source, backbone, pretrained, tasks[0], watch=watch
            )
    if not runtime.chief:
        return None
    found = card_scores.entries(document) if cards else []
    for path in card_scores.add(cards, found) if found else ():
        print(f"model card: {path}")
    if cards and not found:
        print("model card: unchanged (no seed has scores)")
    return document


def glue_run(
    config, runtime, source, backbone, pretrained: dict, tasks: list[jobs.Job], watch=None
) -> dict:
    """Every GLUE task in turn (MNLI first), then the summary and the GLUE score in
    `{output_dir}/results.json`. With --mnli_start, RTE, MRPC and STS-B start from the
    backbone of MNLI's best seed at its best epoch."""
    best = {"score": None, "weights": None}

    def keep_best(record, model):
        # run_seed leaves the best epoch's weights in the model when there is a test split:
        # MNLI's is its mismatched dev set, always read.
        if record.get("diverged"):
            return
        score = record["dev"]["accuracy"]
        if best["score"] is None or score > best["score"]:
            best.update(score=score, weights=model.backbone.get_weights())

    documents = {}
    for job in tasks:
        start = backbone
        if config.mnli_start and job.name in glue.MNLI_STARTED:
            if best["weights"] is None:
                raise UserError("--mnli_start: every MNLI seed diverged, none to start from")
            start = backbone.started_from(best["weights"])
            job.extra["start"] = "MNLI's best seed (--mnli_start)"
        keep = keep_best if config.mnli_start and job.name == "mnli" else None
        documents[job.name] = job_run.run_job(
            config, runtime, source, start, pretrained, job, keep, watch
        )
        job_run.say(runtime, results.table(documents[job.name]))
    document = glue_summary(documents)
    document["pretraining"] = pretrained
    document["model"] = next(iter(documents.values()))["model"]
    document["protocol"] = {
        "recipe_source": glue.RECIPE_SOURCE,
        "mnli_start": config.mnli_start,
        "glue_dir": config.glue_dir,
        "dataset": None if config.glue_dir else glue.HUB_ID,
    }
    if runtime.chief:
        results.write(config.output_dir, document)
    return document


# What `backends.setup` reads beside DeviceFlags, at fixed values: fine-tuning decides XLA
# itself (`classifier.jit_default`, given whether the devices can run it) and runs one step per
# call (its epochs are short, and each ends in an evaluation). Precision and fused attention
# are DeviceFlags: the trainer's rule decides them (`trainer.pretraining.plan.device_settings`).
_TRAINER_ONLY = {"jit_compile": "auto", "steps_per_execution": None}


def devices(config: FinetuneFlags, tasks: list[jobs.Job]):
    """The trainer's Runtime for --strategy / --cpu_replicas (`trainer.backends`: JAX
    DataParallel, a TensorFlow strategy); refuses a global batch the replicas cannot share."""
    from trainer import backends
    from trainer.finetuning.classifier import jit_default

    chosen = {f.name: getattr(config, f.name) for f in dataclasses.fields(DeviceFlags)}
    runtime = backends.setup(types.SimpleNamespace(**chosen, **_TRAINER_ONLY))
    jit_default(config.jit_compile, runtime.device.jit)  # refuses XLA where it fails, now
    for job in tasks:
        batch, replicas = job.recipe.batch_size, runtime.replicas
        if batch % replicas:
            given = (
                f"--batch_size {batch}"
                if config.batch_size
                else (f"{job.name}'s batch of {batch} (pass --batch_size)")
            )
            raise UserError(
                f"{given} is the global batch and does not split over {replicas} "
                f"replicas: give a multiple of {replicas}"
            )
    return runtime


def glue_summary(documents: dict) -> dict:
    """{tasks: {task: {metric: mean over seeds}, seeds, collapsed}, glue: score}."""
    tasks, reported = {}, {}
    for name, document in documents.items():
        scores = document["scores"]
        if "dev" in scores["summary"]:  # else every seed diverged: no score for the task
            reported[name] = glue.reported(glue.TASKS[name], scores["summary"])
        tasks[name] = {
            "reported": reported.get(name),
            "metric": scores["metric"],
            "seeds": [r["seed"] for r in scores["seeds"]],
            "collapsed_seeds": scores["summary"]["collapsed_seeds"],
            "seeds_in_mean": scores["summary"]["seeds_in_mean"],
            "results": fs.join(name, results.RESULTS),
            "dataset": document.get("dataset"),
        }
    return {"glue": glue.glue_score(reported), "tasks": tasks}


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    config = flags.parse(parser, FinetuneFlags, argv)

    def body():
        if config.backend is None:  # else the flag chose it
            keras_backend.check()
        from trainer import backends  # imports Keras: after the backend is chosen

        with backends.errors_end_pod_processes():  # a pod's refusal: one line per host
            document = finetune(config)
        if document is None:  # a pod's process other than 0
            return
        print(results.glue_table(document) if config.task == "glue" else results.table(document))
        print(f"results: {fs.join(config.output_dir, results.RESULTS)}")

    return run_cli(body, argv)
