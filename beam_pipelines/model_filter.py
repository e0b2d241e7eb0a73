"""The model-based quality filter: every clean document scored by a classifier through Beam's
`RunInference`, and those below a threshold (or outside a top fraction) removed or reported.

    python -m beam_pipelines.prepare --input 'web/*.jsonl.gz' --tokenizer TOK --output_dir OUT \\
        --quality_model gs://b/dclm_fasttext.bin --quality_label hq --quality_keep_fraction 0.1

    python -m beam_pipelines.prepare ... --quality_model finetune/quality/hf \\
        --quality_label good --quality_threshold 0.5

The classifiers (fastText files, transformers folders such as `trainer.finetune`'s export)
and their scores: beam_pipelines/quality_models.py. RunInference loads the model once per
worker process and batches documents (`--quality_batch_size`; a transformers model's batches
hold documents of similar length, `LENGTH_BUCKETS`, so little of a batch is padding).

**Where it runs.** On clean documents: after the quality rules, dedup and decontamination
(cheap steps first: nothing removed there is scored) and before the mixture, whose shares
are then of kept text. Blank documents pass unscored (the tokenizer counts them empty).

**What is kept.** `--quality_threshold T`: documents scoring >= T. `--quality_keep_fraction F`:
the threshold is the (1 - F) quantile of all scores of the run (Beam's
`ApproximateQuantiles`, `QUANTILES` points: exact for up to ~10**5 documents, within 1/1000 of
the fraction beyond), so the run waits for every score before it filters; a local run holds
the scored documents in memory meanwhile. Ties at the threshold are kept.

**What is written.** Each document below the threshold is one line of
`OUT/dead_letter/{run_id}-low_quality-*.jsonl` (source, line, score, excerpt; `SHARDS` files
written in parallel) and, with `--quality_action remove`, is counted as
`{split}/documents_low_quality/model` (a term of the accounting's sums) and not tokenized.
The manifest's `quality_model` (`manifest_record`) holds the model's kind, fingerprint and
labels, the threshold used, the documents scored, kept and below, and the scores' quantiles
and mean, which the summary prints.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter

import apache_beam as beam
from apache_beam.ml.inference.base import ModelHandler, RunInference
from apache_beam.transforms.stats import ApproximateQuantiles

from beam_pipelines import jsonl_files, quality_models
from beam_pipelines.accounting import STATS, emit_stats, removal_key
from beam_pipelines.documents import EXCERPT_CHARS, Document, doc_position, ref, split_of

QUANTILES = 1001  # 0, 0.001 ... 1
SHARDS = 16  # low-quality files: one writer each
LENGTH_BUCKETS = [256, 1024, 4096]  # characters: a transformers batch's documents (~4 a token)
SHOWN_QUANTILES = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)
COUNT_PREFIX = "quality_model."


class QualityHandler(ModelHandler):
    """RunInference's model handler: `Document`s -> (document, score) pairs."""

    def __init__(self, spec: quality_models.QualityModelSpec):
        bucketed = spec.kind == "transformers"
        super().__init__(
            min_batch_size=1,
            max_batch_size=spec.batch_size,
            # Length buckets need Beam's stateful batching, which the duration turns on.
            max_batch_duration_secs=60 if bucketed else None,
            batch_length_fn=_length if bucketed else None,
            batch_bucket_boundaries=LENGTH_BUCKETS if bucketed else None,
        )
        self.spec = spec

    def load_model(self):
        self._folder = tempfile.TemporaryDirectory(prefix="quality-model-")  # a remote copy
        return quality_models.open_scorer(self.spec, self._folder.name)

    def run_inference(self, batch, model, inference_args=None):
        scores = model([doc.text for doc in batch])
        return [(doc, float(score)) for doc, score in zip(batch, scores)]

    def get_metrics_namespace(self) -> str:
        return "prepare.quality_model"


def _length(doc: Document) -> int:
    return len(doc.text)


def low_quality_line(doc: Document, score: float, threshold: float, kept: bool) -> str:
    """One line of the low-quality files: where the document is, its score and the rule."""
    action = "kept (--quality_action report)" if kept else "removed"
    return json.dumps(
        ref(doc_position(doc))
        | {
            "rule": "low_quality",
            "score": score,
            "reason": f"score {score:.6g} < threshold {threshold:.6g}; {action}",
            "excerpt": doc.text[:EXCERPT_CHARS],
        },
        ensure_ascii=False,
    )


class Judge(beam.DoFn):
    """(document, score) with the threshold (side input) -> the document when kept (or
    reported), a low-quality line (LOW) when below, and counts (STATS)."""

    LOW = "low"

    def __init__(self, action: str):
        self.action = action

    def start_bundle(self):
        self.stats = Counter()

    def process(self, scored, threshold):
        doc, score = scored
        self.stats[f"{COUNT_PREFIX}scored"] += 1
        if threshold is None or score >= threshold:
            self.stats[f"{COUNT_PREFIX}kept"] += 1
            yield doc
            return
        self.stats[f"{COUNT_PREFIX}below"] += 1
        report = self.action == "report"
        if report:
            yield doc
        else:
            self.stats[removal_key(split_of(doc), "documents_low_quality", "model")] += 1
        yield beam.pvalue.TaggedOutput(self.LOW, low_quality_line(doc, score, threshold, report))

    def finish_bundle(self):
        yield from emit_stats(self.stats)


def threshold_of(spec, quantiles: list) -> float | None:
    """The run's threshold: the given one, or the (1 - keep fraction) quantile of the
    scores (None: nothing was scored)."""
    if spec.threshold is not None:
        return spec.threshold
    if not quantiles:
        return None
    return float(quantiles[round((1 - spec.keep_fraction) * (len(quantiles) - 1))])


class FilterByModel(beam.PTransform):
    """Clean documents -> `(docs, low-quality file paths, stats, record)`: the documents to
    go on with, the paths of the low-quality files, (name, count) pairs and the one-element
    PCollection of the model's record with the threshold and quantiles (the commit adds the
    counts: `manifest_record`).

    Args:
        spec: the loaded spec (`quality_models.load`).
        prefix: the low-quality files' prefix (`prepared_dir.low_quality_prefix`).
    """

    def __init__(self, spec: quality_models.QualityModelSpec, prefix: str):
        super().__init__()
        self.spec, self.prefix = spec, prefix

    def expand(self, docs):
        blank = docs | "Blank" >> beam.Filter(lambda doc: not doc.text.strip())
        scored = (
            docs
            | "NotBlank" >> beam.Filter(lambda doc: bool(doc.text.strip()))
            | "Score" >> RunInference(QualityHandler(self.spec))
        )
        quantiles = (
            scored
            | "Scores" >> beam.Map(lambda pair: pair[1])
            | "Quantiles" >> ApproximateQuantiles.Globally(QUANTILES)
        )
        spec = self.spec
        threshold = quantiles | "Threshold" >> beam.Map(lambda q: threshold_of(spec, q))
        judged = scored | "Judge" >> beam.ParDo(
            Judge(spec.action), beam.pvalue.AsSingleton(threshold)
        ).with_outputs(Judge.LOW, STATS, main="docs")
        files = judged[Judge.LOW] | "WriteLowQuality" >> jsonl_files.WriteJsonl(self.prefix, SHARDS)
        record = (
            docs.pipeline
            | "ModelRecord" >> beam.Create([spec.record])
            | "WithScores"
            >> beam.Map(
                _with_scores,
                beam.pvalue.AsSingleton(quantiles),
                beam.pvalue.AsSingleton(threshold),
            )
        )
        kept = (judged.docs, blank) | "Kept" >> beam.Flatten()
        return kept, files, judged[STATS], record


def _with_scores(record: dict, quantiles: list, threshold) -> dict:
    shown = {}
    if quantiles:
        last = len(quantiles) - 1
        shown = {f"{q:g}": float(quantiles[round(q * last)]) for q in SHOWN_QUANTILES}
    return record | {"threshold_used": threshold, "score_quantiles": shown}


def manifest_record(record: dict, stats: dict) -> dict:
    """The manifest's `quality_model`: the model (kind, path, sha256, files, labels, what
    the score is), the threshold asked and used, the action, the score quantiles, and the
    documents scored, kept, below the threshold and removed."""
    counts = {
        f"documents_{what}": int(stats.get(f"{COUNT_PREFIX}{what}", 0))
        for what in ("scored", "kept", "below")
    }
    removed = sum(int(n) for k, n in stats.items() if "/documents_low_quality/" in k)
    return record | counts | {"documents_removed": removed}


def summary_lines(record: dict) -> list[str]:
    """What the filter did (the manifest's `quality_model`), for prepare's summary."""
    if not record:
        return []
    kept_by = (
        f">= {record['threshold_used']:.4g}"
        if record.get("threshold_used") is not None
        else "(nothing scored)"
    )
    if record.get("keep_fraction") is not None:
        kept_by += f" (top {record['keep_fraction']:g})"
    quantiles = ", ".join(
        f"p{float(q) * 100:g} {v:.4g}" for q, v in record["score_quantiles"].items()
    )
    return [
        f"quality model ({record['kind']}, {record['score']}, sha256 {record['sha256'][:12]}): "
        f"{record['documents_scored']:,} scored, {record['documents_kept']:,} kept {kept_by}, "
        f"{record['documents_below']:,} below ({record['documents_removed']:,} removed, "
        f"{record['action']})",
        f"  scores: {quantiles}" if quantiles else "  scores: none",
    ]
