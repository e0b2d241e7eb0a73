"""A cross-encoder reranker's loop (`--task_type` reranking; its `task_kinds` record names this
module): the family's classifier with one logit reads (query, passage) packed as a pair
(`packing`), is trained with binary cross-entropy on the logit, and is scored by reranking
BM25's top `--rerank_top` candidates of each judged query of a BEIR folder. Where the family
reads packed rows (`--packing`, ModernBERT), the training pairs are packed several a row.

The data (`trainer.tasks.reranker_data`): `--train` labelled pairs (or query/positive pairs,
negatives mined with BM25 where the file gives none); `--dev` and `--test` BEIR folders,
split `--dev_split` (default dev) and `--test_split` (default test). BM25's own scores
("before") are the document's `bm25` and its `constant_answer_dev`: a seed that does not beat
BM25 on dev is flagged collapsed (`protocol.summarise`). Everything is read, ranked and checked,
with the tokenizer's pair framing and the pooling the export can express, before any model
loads. The pooling is `--pooling`, else the first token (what every transformers
`*ForSequenceClassification` reads).

Each seed trains from the same backbone for its epochs (one compiled step: every batch, the
last padded with rows of weight 0, has one shape), reranks dev after each epoch, keeps the
best epoch by `--metric` and scores test with it. The best seed's best epoch is exported as
`{output_dir}/hf/`, a transformers `*ForSequenceClassification` with one label that
sentence-transformers' `CrossEncoder` loads (`trainer.release.cross_encoder_export`).

Example:
    >>> job = build(config, "tiny", settings)[0]     # reads and ranks before any model loads
    >>> document = run_job(runtime, source, backbone, pretrained, job)
    >>> print(table(document))
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from common import fs, tokenizer_files
from common.errors import Terminated, UserError
from trainer.finetuning import (
    divergence,
    interruption,
    job_run,
    jobs,
    packed_rows,
    packing,
    protocol,
    recipes,
    results,
)
from trainer.models import model_source
from trainer.tasks.reranker_data import Candidates, bm25_scores, candidates, read_train, scored

PREDICT_BATCHES = 4  # scoring runs this many training batches at once (no gradients kept)
EXPORT_DIR = "hf"
PROTOCOL = (
    "a cross-encoder: the family's classifier with one logit on (query, passage) packed as a "
    "pair; binary cross-entropy on the logit (labels 0..1); dev and test rerank BM25's top "
    "candidates of each judged query by the logit; BM25's own scores are constant_answer_dev"
)


@dataclasses.dataclass(frozen=True)
class Options:
    """What the runner's own loop reads of the flags (`jobs.Job.options`)."""

    rerank_top: int
    max_length: int
    tokenizer_note: str  # how the export's tokenizer frames a pair, when it had to change
    packing: str = "auto"  # --packing: training pairs several a row where the family can


def build(config, size: str, settings: jobs.Settings) -> list[jobs.Job]:
    """The one job of the flags: its files read, ranked and checked (module docstring)."""
    from trainer.release import cross_encoder_export

    if config.hf_dataset:
        raise UserError("--hf_dataset: a reranker reads a --train JSONL file and --dev BEIR folder")
    if isinstance(config.recipe(config.metric).learning_rate, recipes.Auto):
        raise UserError("--learning_rate auto is for classifier heads: give a reranker a number")
    source = model_source.resolve(config.model)  # what the model is; its weights load later
    _, info = tokenizer_files.load(source.tokenizer_dir)
    pooling = config.pooling or "cls"  # a cross-encoder's: what every transformers class reads
    args = (source.family, source.record.backbone_config, info.special_token_ids, pooling)
    problem = cross_encoder_export.pooling_problem(*args)
    if problem:
        raise UserError(problem)
    max_length = config.max_length or min(jobs.DEFAULT_MAX_LENGTH, source.max_sequence_length)
    if max_length > source.max_sequence_length:
        raise UserError(f"--max_length {max_length} is more than the model's positions")
    export = fs.join(config.output_dir, EXPORT_DIR)
    if fs.files_under(export) and not fs.exists(fs.join(export, "config.json")):
        raise UserError(f"{export} holds files but no config.json: the export would replace it")
    note = cross_encoder_export.check(source, info, max_length, packing.framing(source))
    if note:
        print(f"note: {note}", flush=True)
    splits = {"train": read_train(config.train)}
    named = {"dev": config.dev_split or "dev", "test": config.test_split or "test"}
    for split, folder in (("dev", config.dev), ("test", config.test)):
        if folder:
            splits[split] = candidates(folder, named[split], config.rerank_top)
    defaults = recipes.own_defaults(size)
    known = size in recipes.SIZE_RECIPES
    job = jobs.Job(
        name="task",
        task_type=config.task_type,
        splits=splits,
        names=None,
        recipe=config.recipe(config.metric, defaults),
        seeds=tuple(config.seed_list()),
        output_dir=config.output_dir,
        settings=dataclasses.replace(settings, pooling=pooling),
        recipe_source=recipes.SIZE_SOURCE if known else results.RECIPE_SOURCE,
        options=Options(config.rerank_top, max_length, note, config.packing),
    )
    return [job]


def _pack(source, job: jobs.Job) -> tuple[dict, dict]:
    """({split: features} with train's (features, labels), {split: counts})."""
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    packer = packing.Packer(tokenizer, info, source.family, job.options.max_length)
    texts = {
        name: s.texts() if isinstance(s, Candidates) else (s.texts, s.pairs)
        for name, s in job.splits.items()
    }
    packed = {name: packer.pack(*pair) for name, pair in texts.items()}
    length = max(len(row) for found in packed.values() for row in found.rows)
    arrays = {
        name: found.features(length, info.pad_id, source.family.takes_segment_ids)
        for name, found in packed.items()
    }
    arrays["train"] = (arrays["train"], job.splits["train"].labels)
    if packed_rows.applies(source.family, job.options.packing):
        rows = packed_rows.pack_example_targets(
            *arrays["train"], info.pad_id, job.options.max_length
        )
        arrays = {name: packed_rows.one_per_row(f) for name, f in arrays.items() if name != "train"}
        arrays["train"] = rows
    counts = {}
    for name, split in job.splits.items():
        counts[name] = {
            "examples": len(texts[name][0]),
            "skipped_empty": 0,
            "truncated": packed[name].truncated,
            "max_length": job.options.max_length,
        }
        if isinstance(split, Candidates):
            data = split.data
            counts[name].update(path=data.folder, split=data.split, queries=len(data.queries))
            counts[name].update(queries_left_out=data.queries_left_out)
        else:
            counts[name].update(path=split.path, mined_negatives=split.mined)
            counts[name].update(positive=int((split.labels >= 0.5).sum()))
    return arrays, counts


class _Seeds:
    """One compiled model for every seed (as `protocol.SeedModels`): each seed copies in a
    freshly seeded classifier's variables and zeroes the optimizer's."""

    def __init__(self, backbone, recipe, train: tuple, jit: bool, runtime):
        self.backbone, self.recipe, self.jit, self.runtime = backbone, recipe, jit, runtime
        # Packed (targets per token): a step of the rows that hold --batch_size pairs on average
        rows, self.packed = len(train[1]), train[1].ndim == 3
        self.batch = recipe.batch_size
        if self.packed:
            pairs = int(train[1][..., 1].sum())  # a weight of 1 on each pair's first token
            self.batch = packed_rows.rows_per_step(rows, pairs, recipe.batch_size, runtime.replicas)
        self.steps = math.ceil(rows / self.batch) * recipe.epochs
        processes = runtime.num_pipelines if runtime.backend == "jax" else 1
        process = runtime.pipeline_id if processes > 1 else 0
        self.devices = protocol.Devices(runtime.replicas, process, processes)
        self.precision = runtime.device.precision
        self.fused_attention = bool(runtime.device.fused_attention)
        self.model = None

    def start(self, seed: int):
        import keras

        from trainer import backends
        from trainer.training.optimizer import AdamWSettings, build_optimizer

        with self.runtime.scope():
            fresh = self.backbone.classifier(1, seed, self.precision, self.fused_attention)
            if self.model is not None:
                model = self.model.classifier if self.packed else self.model
                for target, value in zip(model.variables, fresh.variables, strict=True):
                    target.assign(value)
                for variable in self.model.optimizer.variables:
                    variable.assign(np.zeros(variable.shape, variable.dtype))
                return self.model
            warmup = round(self.steps * self.recipe.warmup_ratio)
            settings = AdamWSettings(weight_decay=self.recipe.weight_decay)
            optimizer = build_optimizer(self.recipe.learning_rate, self.steps, warmup, settings)
            # Divided by the weights' sum: the rows that pad the last batch weigh 0.
            loss = keras.losses.BinaryCrossentropy(
                from_logits=True, reduction="mean_with_sample_weight"
            )
            if self.packed:
                from trainer.models import packed_models

                family = self.backbone.family
                fresh = packed_models.PackedClassifier(
                    fresh, family.packed_states, self.backbone.pooling
                )
            fresh.compile(optimizer=optimizer, loss=loss, jit_compile=self.jit)
            if self.devices.processes > 1:
                backends.replicate_predictions(fresh)
            self.model = fresh
        return fresh

    def _share(self, arrays, count: int, batch: int):
        """This process's rows of every global batch (`protocol.Devices.share`)."""
        rows = self.devices.share(count, batch)
        if rows is None:
            return arrays
        return {k: v[rows] for k, v in arrays.items()} if isinstance(arrays, dict) else arrays[rows]

    def fit_arrays(self, train: tuple, seed: int, epoch: int) -> dict:
        """One epoch's `fit` arguments: this seed's order, padded to whole batches (packed:
        per token, the weight 1 on each pair's first token)."""
        batch = self.batch
        features, labels = protocol.shuffled(train, seed, epoch)
        features, extra = protocol.padded(features, len(labels), batch)
        if self.packed:
            labels, weights = labels[..., :1], labels[..., 1]
        else:
            weights, labels = np.ones(len(labels), np.float32), labels[:, None]
        weights = np.concatenate([weights, np.zeros((extra, *weights.shape[1:]), np.float32)])
        labels = np.concatenate([labels, np.zeros((extra, *labels.shape[1:]), np.float32)])
        count = len(weights)
        return {
            "x": self._share(features, count, batch),
            "y": self._share(labels, count, batch),
            "sample_weight": self._share(weights, count, batch),
            "batch_size": batch // self.devices.processes,
        }

    def logits(self, features: dict) -> np.ndarray:
        """One float32 logit per row, every batch of one shape."""
        batch = self.recipe.batch_size * PREDICT_BATCHES
        count = len(next(iter(features.values())))
        features, extra = protocol.padded(features, count, batch)
        mine = self._share(features, count + extra, batch)
        found = self.model.predict(mine, batch_size=batch // self.devices.processes, verbose=0)
        found = np.asarray(found, np.float32)[:count]
        return found[:, 0, 0] if self.packed else found[:, 0]  # packed: at the first token


def _epoch(seeds: _Seeds, job: jobs.Job, arrays: dict, seed: int, epoch: int, watch) -> dict:
    """One epoch's entry, with `stopped` where the loss or the logits turned non-finite."""
    fitted = seeds.fit_arrays(arrays["train"], seed, epoch)
    loss, stopped = protocol.fit_epoch(seeds.model, fitted, seed, epoch, watch)
    if stopped:
        return {"epoch": epoch, "train_loss": None, "stopped": stopped}
    logits = seeds.logits(arrays["dev"])
    if not np.isfinite(logits).all():
        return {"epoch": epoch, "train_loss": None, "stopped": divergence.NO_FINITE_DEV}
    return {
        "epoch": epoch,
        "train_loss": loss,
        "dev": scored(job.splits["dev"], logits),
        "distinct_predictions": int(len(np.unique(logits))),
    }


def run_seed(seeds: _Seeds, job: jobs.Job, arrays: dict, seed: int, on_epoch=None, watch=None):
    """(the seed's record, its best epoch's weights or None where it diverged)."""
    started, metric = time.perf_counter(), job.recipe.metric
    model = seeds.start(seed)
    epochs, best, weights = [], None, None
    for epoch in range(1, job.recipe.epochs + 1):
        entry = _epoch(seeds, job, arrays, seed, epoch, watch)
        epochs.append(entry)
        seconds = round(time.perf_counter() - started, 2)
        if "stopped" in entry:
            return divergence.record(seed, epochs, entry["stopped"], seconds), None
        if on_epoch:
            on_epoch(seed, entry)
        if protocol.better(entry["dev"][metric], best and best["dev"][metric], metric):
            best, weights = entry, model.get_weights()
    record = {"seed": seed, "best_epoch": best["epoch"], "dev": best["dev"], "epochs": epochs}
    model.set_weights(weights)
    if "test" in arrays:
        record["test"] = scored(job.splits["test"], seeds.logits(arrays["test"]))
    record["seconds"] = round(time.perf_counter() - started, 2)
    return record, weights


def _add_scores(document: dict, seeds: _Seeds, records: list, pretrained: dict, before) -> None:
    """The scores as `job_run` writes them; BM25's (`before`) are the floor."""
    from trainer import backends

    metric = document["protocol"]["metric"]
    document["protocol"].update(
        replicas=backends.model_replicas(seeds.model),
        processes=seeds.devices.processes,
        precision=seeds.precision,
        fused_attention=seeds.fused_attention,
    )
    document["pretraining"] = pretrained
    document["bm25"] = before
    document["scores"] = {
        "metric": metric,
        "seeds": records,
        "constant_answer_dev": before["dev"],
        "summary": protocol.summarise(records, metric, before["dev"]),
    }


def run_job(runtime, source, backbone, pretrained: dict, job: jobs.Job, watch=None) -> dict:
    """Every seed of the job; returns the results document, written (with the best seed's
    export) by the chief. A SIGTERM writes the complete seeds, marked interrupted."""
    from trainer.finetuning.classifier import jit_default
    from trainer.release import cross_encoder_export

    arrays, counts = _pack(source, job)
    info = tokenizer_files.load(source.tokenizer_dir)[1]
    backbone.check_tokenizer(info)
    dev, test = (arrays["dev"], None), (arrays["test"], None) if "test" in arrays else None
    data = protocol.TaskData(job.task_type, 1, arrays["train"], dev, test)
    job_run.check_hosts_agree(runtime, job.settings.flags, data)
    jit = jit_default(job.settings.jit_compile, runtime.device.jit)
    seeds = _Seeds(backbone, job.recipe, arrays["train"], jit, runtime)
    scalars = results.Scalars(job.output_dir) if runtime.chief else None
    document = job_run.results_document(source, backbone, job, counts)
    document["protocol"]["cross_encoder"] = PROTOCOL
    document["protocol"]["rerank_top"] = job.options.rerank_top
    document["protocol"]["rows"] = "packed" if seeds.packed else "padded"  # --packing, as applied
    before = {n: bm25_scores(s) for n, s in job.splits.items() if isinstance(s, Candidates)}
    records, best, metric = [], (None, None, None), job.recipe.metric
    try:
        for seed in job.seeds:
            record, weights = run_seed(seeds, job, arrays, seed, scalars, watch)
            job_run.say(runtime, job_run.seed_line(job, record))
            records.append(record)
            if weights is not None and protocol.better(record["dev"][metric], best[0], metric):
                best = (record["dev"][metric], seed, weights)
    except interruption.Interrupted as stop:
        path = None
        if records:
            _add_scores(document, seeds, records, pretrained, before)
            document["interrupted"] = f"{stop}; complete: seed(s) {[r['seed'] for r in records]}"
            chief = runtime.chief
            path = results.write(job.output_dir, document) if chief else "process 0's results.json"
        raise Terminated(interruption.ended(stop, job.name, len(records), path)) from None
    _add_scores(document, seeds, records, pretrained, before)
    if best[2] is not None:
        folder = fs.join(job.output_dir, EXPORT_DIR)
        document["export"] = {
            "path": folder,
            "seed": best[1],
            "architecture": cross_encoder_export.architecture(source.family),
            "predict": cross_encoder_export.PREDICT,
            "tokenizer": job.options.tokenizer_note or None,
        }
        if runtime.chief:
            seeds.model.set_weights(best[2])
            args = (job.settings.pooling, job.options.max_length, folder, packing.framing(source))
            classifier = seeds.model.classifier if seeds.packed else seeds.model
            cross_encoder_export.export(source, info, classifier, *args)
    if runtime.chief:
        results.write(job.output_dir, document)
    return document


def table(document: dict) -> str:
    """`results.table`, then BM25's scores before reranking and where the export is."""
    lines = [results.table(document)]
    top = document["protocol"]["rerank_top"]
    for split, found in document["bm25"].items():
        shown = ", ".join(f"{name} {results.number(value)}" for name, value in found.items())
        lines.append(f"BM25 {split}, before reranking its top {top}: {shown}")
    if document.get("export"):
        lines.append(
            f"cross-encoder: {document['export']['path']} (seed {document['export']['seed']}'s "
            "best epoch; CrossEncoder(path).predict gives sigmoid(logit))"
        )
    return "\n".join(lines)
