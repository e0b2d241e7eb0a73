"""Contrastive fine-tuning of an embedding model, scored by retrieval: the loop of the
`embedding` task kind (`trainer.finetune --task_type embedding`).

    python -m trainer.finetune --model runs/tiny --task_type embedding \
        --train pairs.jsonl --dev beir/scifact --dev_split dev --test beir/scifact \
        --output_dir finetune/embed

Training: the pairs (a JSONL pair file, `tasks/pairs.py`, or a BEIR folder's `qrels/train.tsv`)
are batched with no text twice in a batch (`pairs.batches`), each query's positive against every
other document of the batch and the pairs' hard negatives (InfoNCE, `contrastive.info_nce`,
temperature `--temperature`), the model's vectors pooled (`--pooling`, default mean) and
L2-normalised as the sentence-transformers export computes them. `--gradient_chunk` embeds a
chunk of rows at a time by gradient caching: a batch larger than memory, the same gradient.
Shapes are bucketed (`embedding_data`), the step compiled (`embedding_step`).

Scoring: after every epoch the dev split of the `--dev` BEIR folder is searched exactly
(`retrieval.exact_search`) and scored (nDCG@10, MRR@10, recall@100); each seed keeps its best
epoch by `--metric` and scores `--test` with it. BM25 (`retrieval.bm25`) on the same splits is
printed beside, and a ranking that learnt nothing (every score equal: the documents in id
order) is the constant answer a collapsed seed is compared with. The best seed's model is
written as a sentence-transformers folder, `{output_dir}/sentence-transformers/`.

Example:
    >>> jobs = build(config, "tiny", settings)
    >>> document = run_job(runtime, source, backbone, pretrained, jobs[0])
    >>> document["bm25"]["dev"]["ndcg@10"], document["scores"]["summary"]["dev"]["ndcg@10"]
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

import keras
import numpy as np

from common import fs, tokenizer_files
from common.errors import UserError
from trainer.finetuning import (
    embedding_data,
    embedding_results,
    embedding_step,
    interruption,
    job_run,
    jobs,
    packed_rows,
    protocol,
    recipes,
    results,
)
from trainer.tasks import pairs as pair_files
from trainer.tasks.retrieval import beir, bm25, evaluation

BATCH_SIZE = 32  # pairs per step: in-batch negatives want more than a classifier's 16
EVAL_BATCH = 64  # texts embedded per call when scoring
DEFAULT_POOLING = "mean"  # sentence-transformers' default
ST_FOLDER = "sentence-transformers"


@dataclasses.dataclass(frozen=True)
class EmbeddingOptions:
    temperature: float
    chunk: int | None  # rows per gradient-caching chunk; None: the whole batch at once
    pooling: str
    packing: str  # auto, on, off: several texts a row (`packed_rows`)


def build(config, size: str, settings: jobs.Settings) -> list[jobs.Job]:
    """The one job of the flags: its pairs and BEIR splits read and checked before any model
    loads."""
    if not config.dev:
        raise UserError("--dev is required: a BEIR folder whose dev split scores each epoch")
    train = _hub_pairs(config) if config.hf_dataset else embedding_data.train_pairs(config.train)
    splits = {"train": train, "dev": beir.read(config.dev, config.dev_split or "dev")}
    if config.test:
        splits["test"] = beir.read(config.test, config.test_split or "test")
    defaults = dataclasses.replace(recipes.own_defaults(size), batch_size=BATCH_SIZE)
    recipe = config.recipe(config.metric, defaults)
    if config.gradient_chunk and recipe.batch_size % config.gradient_chunk:
        raise UserError(
            f"--gradient_chunk {config.gradient_chunk} does not divide the batch of "
            f"{recipe.batch_size} pairs"
        )
    if len(train) < recipe.batch_size:
        raise UserError(
            f"{config.train} holds {len(train)} pairs, fewer than one batch of "
            f"{recipe.batch_size}: lower --batch_size"
        )
    options = EmbeddingOptions(
        config.temperature, config.gradient_chunk, config.pooling or DEFAULT_POOLING, config.packing
    )
    job = jobs.Job(
        "task", config.task_type, splits, None, recipe, tuple(config.seed_list()),
        config.output_dir, settings, options=options,
    )  # fmt: skip
    return [job]


def _hub_pairs(config) -> pair_files.Pairs:
    """The training pairs of --hf_dataset's --train_split (default train): its query, positive
    and negative columns, else sentence-transformers' order (`pairs.dataset_rows`)."""
    from trainer.tasks import datasets, hub

    loaded = hub.load(
        config.hf_dataset, config.hf_config, config.hf_revision, hint="--train (a pair file)"
    )
    split = config.train_split or "train"
    if split not in loaded.splits:
        raise UserError(
            f"{loaded.title} has no split {split!r} (it has {', '.join(loaded.splits)}): "
            "name one with --train_split"
        )
    columns, rows, _ = datasets.dataset_rows(loaded.splits[split])
    found = pair_files.from_rows(loaded.label(split), pair_files.dataset_rows(columns, rows))
    print(loaded.said({"train": split}, {"train": len(found)}), flush=True)
    return found


@dataclasses.dataclass
class Context:
    """What every seed of a job shares."""

    job: jobs.Job
    backbone: object  # classifier.PretrainedBackbone
    rows: embedding_data.TrainRows
    tokenizer: object
    info: object
    max_length: int
    runtime: object
    jit: bool
    layout: object  # packed_rows.Packed or Padded

    @property
    def packed(self) -> bool:
        return isinstance(self.layout, packed_rows.Packed)


def _max_length(source, job: jobs.Job) -> int:
    given = job.settings.max_length
    length = given or min(jobs.DEFAULT_MAX_LENGTH, source.max_sequence_length)
    if length > source.max_sequence_length:
        raise UserError(
            f"--max_length {length} is more than the model's {source.max_sequence_length} positions"
        )
    return length


def _embedding_model(ctx: Context, seed: int):
    from trainer.models import model

    keras.utils.set_random_seed(seed)
    precision = ctx.runtime.device.precision if ctx.runtime else "fp32"
    with ctx.runtime.scope() if ctx.runtime else contextlib.nullcontext():
        backbone = model.build_backbone(
            ctx.backbone.family, ctx.backbone.config, model.dtype_policy(precision)
        )
        if not ctx.backbone.from_scratch:
            backbone.set_weights(ctx.backbone.weights)
        how, family = ctx.job.options.pooling, ctx.backbone.family
        return embedding_data.model(backbone, family, how, ctx.packed), backbone


def _trainer(ctx: Context, seed: int, steps: int):
    from trainer.training.optimizer import AdamWSettings, build_optimizer

    embedder, backbone = _embedding_model(ctx, seed)
    recipe, options = ctx.job.recipe, ctx.job.options
    optimizer = build_optimizer(
        recipe.learning_rate,
        steps,
        round(steps * recipe.warmup_ratio),
        AdamWSettings(weight_decay=recipe.weight_decay),
    )
    replicas = ctx.runtime.replicas if ctx.runtime else 1
    step = embedding_step.Trainer(
        embedder, optimizer, options.chunk, options.temperature, ctx.jit, replicas
    )
    return step, backbone


def _epoch(ctx: Context, trainer, seed: int, epoch: int, watch) -> dict:
    pairs, recipe = ctx.job.splits["train"], ctx.job.recipe
    packing = pair_files.batches(pairs, recipe.batch_size, seed=seed * 1000 + epoch)
    losses = []
    for number, indices in enumerate(packing.batches, start=1):
        queries, documents = ctx.rows.batch(indices, ctx.layout, ctx.job.options.chunk)
        losses.append(trainer.step(queries, documents))
        if not np.isfinite(losses[-1]):
            return {
                "epoch": epoch,
                "train_loss": None,
                "stopped": f"non-finite loss at batch {number}",
            }
        if watch is not None:  # a SIGTERM: stop at this batch's end (`interruption`)
            watch.calls += 1
            if watch.reached(watch.calls):
                raise interruption.Interrupted(seed, epoch, number)
    return {
        "epoch": epoch,
        "train_loss": float(np.mean(losses)),
        "batches": len(packing.batches),
        "pairs_dropped": len(packing.dropped),
    }


def _search(ctx: Context, trainer):
    from trainer.tasks.retrieval import exact_search

    encode = embedding_data.Encoder(
        trainer.embed, ctx.tokenizer, ctx.info, ctx.max_length, ctx.layout, EVAL_BATCH
    )
    return exact_search.searcher(encode, encode)


def _score(ctx: Context, trainer, split: str) -> dict:
    scores = evaluation.evaluate_data(ctx.job.splits[split], _search(ctx, trainer))
    return {name: scores[name] for name in _metrics()}


def _metrics() -> tuple:
    from trainer.tasks.retrieval import metrics

    return metrics.NAMES


def run_seed(ctx: Context, seed: int, watch=None) -> tuple[dict, list | None]:
    """(the seed's record, as `protocol.run_seed`'s; its best epoch's backbone weights)."""
    from trainer.finetuning import divergence

    started = time.perf_counter()
    recipe = ctx.job.recipe
    steps = max(1, len(ctx.job.splits["train"]) // recipe.batch_size) * recipe.epochs
    trainer, backbone = _trainer(ctx, seed, steps)
    epochs, best, best_weights = [], None, None
    for epoch in range(1, recipe.epochs + 1):
        entry = _epoch(ctx, trainer, seed, epoch, watch)
        if entry["train_loss"] is None:
            epochs.append(entry)
            return divergence.record(seed, epochs, entry["stopped"], _since(started)), None
        entry["dev"] = _score(ctx, trainer, "dev")
        epochs.append(entry)
        job_run.say(ctx.runtime, _epoch_line(seed, entry, recipe.metric))
        if protocol.better(
            entry["dev"][recipe.metric], best and best["dev"][recipe.metric], recipe.metric
        ):
            best = entry
            trainer.sync()
            best_weights = trainer.weights(), backbone.get_weights()
    record = {"seed": seed, "best_epoch": best["epoch"], "dev": best["dev"], "epochs": epochs}
    trainer.set_weights(best_weights[0])
    if "test" in ctx.job.splits:
        record["test"] = _score(ctx, trainer, "test")
    record["seconds"] = _since(started)
    return record, best_weights[1]


def _epoch_line(seed: int, entry: dict, metric: str) -> str:
    return (
        f"seed {seed} epoch {entry['epoch']}: loss {entry['train_loss']:.4f}, dev {metric} "
        f"{entry['dev'][metric]:.4f}"
    )


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 2)


def floors(job: jobs.Job) -> tuple[dict, dict]:
    """(BM25's scores per split, the constant ranking's dev scores)."""
    found = {}
    for split in ("dev", "test"):
        if split in job.splits:
            scores = evaluation.evaluate_data(job.splits[split], bm25.rank)
            found[split] = {name: scores[name] for name in _metrics()}

    def constant(corpus, queries, k):  # every document the same score: ties by id
        ranking = [(doc_id, 0.0) for doc_id in corpus]
        return {query_id: ranking for query_id in queries}

    dev = evaluation.evaluate_data(job.splits["dev"], constant)
    return found, {name: dev[name] for name in _metrics()}


def run_job(runtime, source, backbone, pretrained: dict, job: jobs.Job, watch=None) -> dict:
    """Fine-tunes every seed; returns the results document (written by the chief) and writes
    the best seed's model as a sentence-transformers folder."""
    from trainer.finetuning.classifier import jit_default

    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    backbone.check_tokenizer(info)
    max_length = _max_length(source, job)
    rows = embedding_data.TrainRows.of(tokenizer, info, job.splits["train"], max_length)
    jit = jit_default(job.settings.jit_compile, runtime.device.jit if runtime else True)
    packed = packed_rows.applies(source.family, job.options.packing)
    layout = embedding_data.layout(
        info, max_length, source.family, packed, runtime.replicas if runtime else 1
    )
    ctx = Context(job, backbone, rows, tokenizer, info, max_length, runtime, jit, layout)
    exportable = _exportable(source, info, runtime)
    bm25_scores, constant = floors(job)
    job_run.say(runtime, _bm25_line(bm25_scores, job.recipe.metric))
    records, best = [], (None, None)
    for seed in job.seeds:
        record, weights = run_seed(ctx, seed, watch)
        records.append(record)
        score = (record.get("dev") or {}).get(job.recipe.metric)
        if weights is not None and protocol.better(score, best[0], job.recipe.metric):
            best = (score, weights)
    document = embedding_results.document(source, backbone, job, ctx, pretrained)
    document["bm25"] = bm25_scores
    document["scores"] = {
        "metric": job.recipe.metric,
        "seeds": records,
        "constant_answer_dev": constant,
        "summary": protocol.summarise(records, job.recipe.metric, constant),
    }
    if runtime is None or runtime.chief:
        if best[1] is not None and exportable:
            document["export"] = fs.join(job.output_dir, ST_FOLDER)
        results.write(job.output_dir, document)
        if document.get("export"):  # after the scores: a failed write loses no result
            _write_model(source, info, best[1], job)
    return document


def _exportable(source, info, runtime) -> bool:
    """Whether the sentence-transformers folder can be written (its tokenizer must frame a
    text as the model reads one); said now, before the training, when it cannot."""
    from trainer.release import sentence_transformers_export as st_export

    try:
        st_export.check_framing(source.tokenizer_dir, info, source.max_sequence_length)
    except UserError as err:
        job_run.say(
            runtime,
            f"warning: the best model will not be written as a sentence-transformers folder: {err}",
        )
        return False
    return True


def _bm25_line(found: dict, metric: str) -> str:
    said = ", ".join(f"{split} {metric} {scores[metric]:.4f}" for split, scores in found.items())
    return f"BM25 (the lexical floor): {said}"


def _write_model(source, info, weights: list, job: jobs.Job) -> str:
    """The best seed's backbone as a sentence-transformers folder (our pooling, normalised)."""
    from trainer.models import model_source
    from trainer.release import export
    from trainer.release import sentence_transformers_export as st_export

    masked_lm = model_source.load_source(source)
    masked_lm.backbone.set_weights(weights)
    folder = fs.join(job.output_dir, ST_FOLDER)
    export.export_hf(masked_lm, source, info, folder)
    st_export.write(folder, source, info, job.options.pooling)
    return folder


def table(document: dict) -> str:
    return embedding_results.table(document)
