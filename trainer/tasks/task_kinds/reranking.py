"""Reranking: a cross-encoder reads (query, passage) together and gives one relevance logit,
trained on labelled pairs; scored by reranking BM25's top candidates on a BEIR folder (nDCG@10
before and after); its loop is trainer/finetuning/reranker_run.py."""

from __future__ import annotations

from trainer.tasks.retrieval import metrics as retrieval_metrics
from trainer.tasks.task_kinds.kind import TaskKind

RERANKING = TaskKind(
    name="reranking",
    card_name="Text ranking",
    named_classes=False,
    metrics=lambda outputs: retrieval_metrics.NAMES,
    default_metric=retrieval_metrics.NAMES[0],
    runner="trainer.finetuning.reranker_run",
    card_type="text-ranking",
)
