"""Token classification (named entities, chunks): the loop of the task kind whose `runner`
this module is (`trainer/tasks/task_kinds/`), run by `python -m trainer.finetune`.

Words and tags come from CoNLL columns or JSONL (`trainer/tasks/tagging.py`; a dev or test tag
training never uses is reported in one line and scored as gold). Sentences are tokenized as
running text, each word's label on its first piece (`word_alignment`: the ids pretraining saw;
a byte-level BPE sees each word's prefix space). The model is the backbone and transformers'
token-classification head of the family (`trainer/release/token_classification_export.py`),
fitted on fixed shapes with cross-entropy on the labelled pieces only (by sample weights, so
one XLA program serves every batch on both backends). As `protocol.py` for a classifier, each
seed keeps its best epoch on dev (seqeval's entity F1, or precision, recall, word accuracy) and
scores test with it; the best seed becomes `{output_dir}/hf/` (`pipeline` gives our tags).

Example:
    >>> tasks = build(config, "tiny", settings)      # reads and checks the files; one Job
    >>> document = run_job(runtime, source, backbone, pretrained, tasks[0], watch=watch)
    >>> print(table(document))                       # results.json's table, F1 per type
"""

from __future__ import annotations

import dataclasses
import time

import keras
import numpy as np

from common import fs
from common.errors import Terminated, UserError
from trainer import backends
from trainer.finetuning import (
    divergence,
    interruption,
    job_run,
    jobs,
    packed_rows,
    protocol,
    recipes,
    results,
    tagging_data,
)
from trainer.models.model import fuse_attention
from trainer.release import token_classification_export as exporter
from trainer.tasks import entity_f1, tagging, task_kinds, word_alignment
from trainer.tasks.tagging import IGNORED, OUTSIDE
from trainer.training.optimizer import AdamWSettings, build_optimizer

HF_FOLDER = "hf"  # the best seed's transformers folder, under the output folder
SPLITS = tagging_data.SPLITS


@dataclasses.dataclass(frozen=True)
class TaggingOptions:
    """What a tagging job adds to its `jobs.Job`: the label set and scheme, unseen tags."""

    tagset: tagging.TagSet
    unseen: dict  # split -> tagging.UnseenLabels (dev, test)
    packing: str = "auto"  # --packing: training sentences several a row where the family can


def build(config, size: str, settings: jobs.Settings) -> list[jobs.Job]:
    """The one job of --train/--dev/--test (CoNLL or JSONL), read and checked before any
    model loads."""
    if config.input_format and config.input_format not in tagging.FORMATS:
        raise UserError(f"--input_format {config.input_format}: tagged words are conll or jsonl")
    fmt, dataset = config.input_format or None, None
    if config.hf_dataset:
        splits, dataset = tagging_data.hub_splits(config)
    else:
        paths = dict(zip(SPLITS, (config.train, config.dev, config.test)))
        splits = {n: tagging.read_tagged(p, fmt, config.tag_column) for n, p in paths.items() if p}
    tagset = tagging.label_set(splits["train"], config.tag_scheme)
    print(f"{splits['train'].path}: {tagset.line()}", flush=True)
    unseen = {n: tagging.unseen_labels(splits[n], tagset) for n in ("dev", "test") if n in splits}
    for found in (found for found in unseen.values() if found.counts):
        print(found.line(), flush=True)
    recipe = config.recipe(config.metric, recipes.own_defaults(size))
    if isinstance(recipe.learning_rate, recipes.Auto):
        raise UserError(f"--learning_rate auto is not run for {config.task_type} yet: give a rate")
    source = recipes.SIZE_SOURCE if size in recipes.SIZE_RECIPES else results.RECIPE_SOURCE
    return [
        jobs.Job(
            name="task",
            task_type=config.task_type,
            splits=splits,
            names=tagset.labels,
            recipe=recipe,
            seeds=tuple(config.seed_list()),
            output_dir=config.output_dir,
            settings=settings,
            recipe_source=source,
            dataset=dataset,
            options=TaggingOptions(tagset, unseen, config.packing),
        )
    ]


class TaggerModels(protocol.SeedModels):
    """`protocol.SeedModels` (the devices' scope, precision and batch shares; one compiled
    model for every seed) building a tagger instead of a classifier."""

    def __init__(
        self, backbone, data: tagging_data.TaggingData, recipe, jit_compile: bool, runtime=None
    ):
        super().__init__(backbone, data.arrays, recipe, jit_compile, runtime)
        self.tagging = data

    def _start(self, seed: int):
        labels = len(self.tagging.tagset.labels)
        ids = self.tagging.info.special_token_ids
        build = exporter.packed_tagger if self.tagging.batch_rows else exporter.tagger
        fresh = build(self.backbone, labels, seed, ids, self.precision)
        if self.fused_attention:
            fuse_attention(fresh)
        if self.model is not None:  # later seeds: the compiled model takes the fresh values
            for target, value in zip(self.model.variables, fresh.variables, strict=True):
                target.assign(value)
            for variable in self.model.optimizer.variables:
                variable.assign(np.zeros(variable.shape, variable.dtype))
            return self.model
        recipe = self.recipe
        batch = self.tagging.batch_rows or recipe.batch_size
        total = -(-len(self.tagging.arrays.train[1]) // batch) * recipe.epochs
        settings = AdamWSettings(weight_decay=recipe.weight_decay)
        warmup = round(total * recipe.warmup_ratio)
        optimizer = build_optimizer(recipe.learning_rate, total, warmup, settings)
        # Summed: the weights make it the mean over the global batch's labelled pieces.
        loss = keras.losses.SparseCategoricalCrossentropy(True, reduction="sum")
        fresh.compile(optimizer=optimizer, loss=loss, jit_compile=self.jit_compile)
        if self.devices.processes > 1:
            backends.replicate_predictions(fresh)
        self.model = fresh
        return fresh


def _rows(arrays: dict, rows) -> dict:
    return arrays if rows is None else {name: array[rows] for name, array in arrays.items()}


def epoch_arrays(
    data: tagging_data.TaggingData, seed: int, epoch: int, batch: int, devices
) -> dict:
    """`fit`'s x, y, sample_weight and batch_size for one epoch on this process, in this seed's
    and epoch's order, padded for the replicas. A piece's weight is 1 / the labelled pieces of
    its global batch (0 unlabelled, and on the replicas' padding rows), the loss their sum: the
    mean over the batch's labelled pieces (transformers' ignore_index=-100) on one device, and
    on replicas, whose gradients are summed (TensorFlow) or whose batch is one (JAX), too."""
    features, labels = protocol.shuffled(data.arrays.train, seed, epoch)
    count = len(labels)
    padded, _ = protocol.padded({**features, "_labels": labels}, count, devices.replicas)
    labels = padded.pop("_labels")
    weights = (labels != IGNORED).astype(np.float32)
    weights[count:] = 0.0  # the rows added for the replicas
    for start in range(0, len(weights), batch):
        weights[start : start + batch] /= max(weights[start : start + batch].sum(), 1.0)
    rows = devices.share(len(labels), batch)
    picked = _rows({"y": np.where(labels == IGNORED, 0, labels), "sample_weight": weights}, rows)
    return dict(picked, x=_rows(padded, rows), batch_size=batch // devices.processes)


def predict(model, features: dict, batch: int, devices) -> np.ndarray | None:
    """The label id predicted at every piece, or None where a logit is not finite."""
    count = len(features["token_ids"])
    features, extra = protocol.padded(features, count, devices.replicas)
    mine = _rows(features, devices.share(count + extra, batch))
    logits = np.asarray(model.predict(mine, batch_size=batch // devices.processes, verbose=0))
    logits = logits[:count]
    return logits.argmax(-1) if np.isfinite(logits).all() else None


def word_scores(gold: list, predicted: list, scheme: str) -> tuple[dict, dict]:
    """({metric: value}, F1 and support per entity type) of per-word tags, by seqeval."""
    from seqeval.metrics import accuracy_score

    found = entity_f1.entity_scores(gold, predicted, scheme)
    return {
        "entity_f1": found.f1,
        "entity_precision": found.precision,
        "entity_recall": found.recall,
        "token_accuracy": float(accuracy_score(gold, predicted)),
    }, found.per_type


def evaluate(model, data: tagging_data.TaggingData, split: str, batch: int, devices) -> tuple:
    """(scores, per type, distinct tags predicted) of one split's words."""
    predicted = predict(model, data.split(split)[0], batch, devices)
    gold = data.splits[split].tags
    if predicted is None:  # a diverged model: no number to report
        return dict.fromkeys(task_kinds.get(data.arrays.task_type).metrics(0)), {}, 0
    tags = [
        word_alignment.word_predictions(row, sentence.word_starts, data.tagset.labels)
        for row, sentence in zip(predicted, data.aligned[split].sentences)
    ]
    scores, per_type = word_scores(gold, tags, data.tagset.scheme)
    return scores, per_type, len({tag for sentence in tags for tag in sentence})


def run_seed(models: TaggerModels, seed: int, on_epoch=None, watch=None) -> tuple[dict, list]:
    """One seed: (its record, its best epoch's weights, None when it diverged); the model is
    left with those weights."""
    started = time.perf_counter()
    data, recipe, metric = models.tagging, models.recipe, models.recipe.metric
    model = models.start(seed)
    epochs, best, weights = [], None, None
    for epoch in range(1, recipe.epochs + 1):
        batch = data.batch_rows or recipe.batch_size
        arrays = epoch_arrays(data, seed, epoch, batch, models.devices)
        loss, stopped = protocol.fit_epoch(model, arrays, seed, epoch, watch)
        if stopped:
            epochs.append({"epoch": epoch, "train_loss": None, "stopped": stopped})
            return divergence.record(seed, epochs, stopped, _since(started)), None
        dev, per_type, distinct = evaluate(model, data, "dev", recipe.batch_size, models.devices)
        entry = {"epoch": epoch, "train_loss": loss, "dev": dev}
        entry["distinct_predictions"] = distinct
        epochs.append(entry)
        if on_epoch:
            on_epoch(seed, entry)
        if protocol.better(dev[metric], best and best[0]["dev"][metric], metric):
            best, weights = (entry, per_type), model.get_weights()
    if best is None:
        return divergence.record(seed, epochs, divergence.NO_FINITE_DEV, _since(started)), None
    model.set_weights(weights)
    record = {"seed": seed, "best_epoch": best[0]["epoch"], "dev": best[0]["dev"]}
    record.update(dev_entities=best[1], epochs=epochs)
    if data.arrays.test is not None:
        test = evaluate(model, data, "test", recipe.batch_size, models.devices)
        record.update(test=test[0], test_entities=test[1])
    record["seconds"] = _since(started)
    return record, weights


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 2)


def run_job(runtime, source, backbone, pretrained: dict, job: jobs.Job, watch=None) -> dict:
    """Fine-tunes every seed of `job` on `runtime`'s devices; returns the results document,
    written by the chief with the best seed's transformers folder. At a SIGTERM (`watch`) the
    complete seeds are written, marked interrupted, and `Terminated` ends the command."""
    from trainer.finetuning.classifier import jit_default

    packed = packed_rows.applies(source.family, job.options.packing)
    data = tagging_data.prepare(source, job, packed, runtime.replicas)
    backbone.check_tokenizer(data.info)
    job_run.check_hosts_agree(runtime, job.settings.flags, data.arrays)
    jit = jit_default(job.settings.jit_compile, runtime.device.jit)
    models = TaggerModels(backbone, data, job.recipe, jit, runtime)
    scalars = results.Scalars(job.output_dir) if runtime.chief else None
    document, records, kept = _document(source, backbone, job, data), [], None
    metric = job.recipe.metric
    try:
        for seed in job.seeds:
            record, weights = run_seed(models, seed, scalars, watch)
            job_run.say(runtime, _seed_line(record, metric))
            records.append(record)
            best = kept and kept[0]["dev"][metric]
            if weights is not None and protocol.better(record["dev"][metric], best, metric):
                kept = (record, weights)
    except interruption.Interrupted as stop:
        path = None
        if records:  # what is complete: written, marked interrupted
            _add_scores(document, models, data, records, pretrained)
            document["interrupted"] = f"{stop}; complete: seed(s) {[r['seed'] for r in records]}"
            path = results.write(job.output_dir, document) if runtime.chief else None
        raise Terminated(interruption.ended(stop, job.name, len(records), path)) from None
    _add_scores(document, models, data, records, pretrained)
    if kept is not None:
        models.model.set_weights(kept[1])
        folder = fs.join(job.output_dir, HF_FOLDER)
        if runtime.chief:
            exporter.export(source, data.info, models.model, data.tagset.labels, folder)
        architecture = exporter.architecture(source.family)
        document["export"] = dict(path=folder, architecture=architecture, seed=kept[0]["seed"])
    if runtime.chief:
        results.write(job.output_dir, document)
    return document


def _seed_line(record: dict, metric: str) -> str:
    """The line each seed prints, as the classifier's loop does (`job_run`)."""
    if record.get("diverged"):
        return divergence.line("task", record["seed"], record["diverged"])
    return (
        f"task seed {record['seed']}: best epoch {record['best_epoch']}, dev {metric} "
        f"{results.number(record['dev'][metric])} ({record['seconds']:.1f} s)"
    )


def _add_scores(
    document: dict, models, data: tagging_data.TaggingData, records: list, pretrained
) -> None:
    """The devices the model really ran on, and the scores: every seed's record, the
    all-O answer's dev scores (what a model that learnt nothing gets) and the summary."""
    metric = models.recipe.metric
    gold = data.splits["dev"].tags
    constant = word_scores(gold, [[OUTSIDE] * len(t) for t in gold], data.tagset.scheme)[0]
    replicas, processes = backends.model_replicas(models.model), models.devices.processes
    document["protocol"].update(replicas=replicas, processes=processes, precision=models.precision)
    document["protocol"]["fused_attention"] = models.fused_attention
    document["pretraining"] = pretrained
    document["scores"] = {
        "metric": metric,
        "seeds": records,
        "constant_answer_dev": constant,
        "summary": protocol.summarise(records, metric, constant),
    }


def _document(source, backbone, job: jobs.Job, data: tagging_data.TaggingData) -> dict:
    tagset, scheme = data.tagset, data.tagset.scheme
    return {
        "protocol": {
            **results.protocol_facts(job, data.counts["train"]["max_length"]),
            "notes": results.PROTOCOL_NOTES,
            "optimizer": "AdamW beta (0.9, 0.98), eps 1e-6, global norm clip 1.0, linear warmup "
            "then linear decay to 0; loss on each word's first piece only",
            "scoring": "seqeval, " + entity_f1.seqeval_arguments(scheme).get("mode", "conlleval"),
            "rows": "packed" if data.batch_rows else "padded",  # --packing, as it applied
        },
        "model": results.model_facts(source, backbone, job),
        "task": {
            "name": job.name,
            "type": job.task_type,
            "labels": list(tagset.labels),
            "scheme": tagset.scheme,
            "scheme_reason": tagset.scheme_reason,
            "unseen": {n: found.to_dict() for n, found in job.options.unseen.items()},
        },
        "data": data.counts,
        "dataset": job.dataset,
    }


def table(document: dict) -> str:
    """results.table's, then per entity type the dev F1 (mean over seeds) and what was cut or
    unseen."""
    lines = [results.table(document)]
    scored = [r for r in document["scores"]["seeds"] if r.get("dev_entities")]
    types = sorted({name for r in scored for name in r["dev_entities"]})
    if types:
        f1 = [[r["dev_entities"].get(t, {}).get("f1", 0.0) for r in scored] for t in types]
        said = ", ".join(f"{t} {np.mean(values):.4f}" for t, values in zip(types, f1))
        lines.append(f"dev entity F1 by type (mean of {len(scored)} seed(s)): {said}")
    for split, counts in document["data"].items():
        if counts.get("words_cut") or counts.get("words_without_tokens"):
            lines.append(
                f"{split}: {counts['words_cut']} word(s) beyond {counts['max_length']} tokens and "
                f"{counts['words_without_tokens']} without a piece of their own, predicted O"
            )
        unseen = document["task"]["unseen"].get(split) or {}
        if unseen.get("words"):
            listed = ", ".join(f"{tag} {n}" for tag, n in unseen["tags"].items())
            lines.append(f"{split}: tags training never uses, scored as gold: {listed}")
    if document.get("export"):
        lines.append(f"transformers model (best seed): {document['export']['path']}")
    return "\n".join(lines)
