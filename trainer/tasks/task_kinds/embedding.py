"""Embedding: (query, positive[, negatives]) pairs, a pooled and normalised vector trained with
in-batch negatives (InfoNCE), scored by retrieval on a BEIR folder (nDCG@10, MRR@10, recall@100)
beside BM25's; its loop is trainer/finetuning/embedding_run.py."""

from __future__ import annotations

from trainer.tasks.retrieval import metrics as retrieval_metrics
from trainer.tasks.task_kinds.kind import TaskKind

EMBEDDING = TaskKind(
    name="embedding",
    card_name="Retrieval",
    named_classes=False,
    metrics=lambda outputs: retrieval_metrics.NAMES,
    default_metric=retrieval_metrics.NAMES[0],
    runner="trainer.finetuning.embedding_run",
    card_type="sentence-similarity",
)
