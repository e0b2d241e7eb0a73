"""Tagging (token classification): words labelled by CoNLL columns or JSONL, a label per
word on its first sub-token, scored by entity-level F1 (seqeval's conventions); its loop is
trainer/finetuning/tagging_run.py."""

from __future__ import annotations

from trainer.tasks.task_kinds.kind import TaskKind

METRICS = ("entity_f1", "entity_precision", "entity_recall", "token_accuracy")

TAGGING = TaskKind(
    name="tagging",
    card_name="Token classification",
    named_classes=True,
    metrics=lambda outputs: METRICS,
    default_metric="entity_f1",
    runner="trainer.finetuning.tagging_run",
    card_type="token-classification",
)
