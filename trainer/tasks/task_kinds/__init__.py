"""Downstream task kinds: each one record of what differs between kinds, so that a new kind
(token classification, multiple choice) is one module here (`classification.py`, `regression.py`)
plus its line in `KINDS` and its tests, and no other module compares a kind's name.

A kind says how its labels are read (named classes, or numbers), how many outputs its head
has, its loss, how logits become predictions, its metrics and default metric, the answer of a
model that learnt nothing (the constant-answer baseline) and its model-card task name.

Example:
    >>> kind = get("regression")
    >>> kind.default_metric, kind.outputs(names=None)
    ('spearman', 1)
    >>> get("classification").predictions(np.array([[0.1, 2.0], [3.0, 0.0]]))
    array([1, 0])
"""

from __future__ import annotations

from trainer.tasks.task_kinds.classification import CLASSIFICATION
from trainer.tasks.task_kinds.embedding import EMBEDDING
from trainer.tasks.task_kinds.kind import TaskKind
from trainer.tasks.task_kinds.regression import REGRESSION
from trainer.tasks.task_kinds.reranking import RERANKING
from trainer.tasks.task_kinds.tagging import TAGGING

_ALL = (CLASSIFICATION, REGRESSION, EMBEDDING, RERANKING, TAGGING)
KINDS = {kind.name: kind for kind in _ALL}  # the registry
NAMES = tuple(KINDS)  # --task_type's choices
__all__ = ["KINDS", "NAMES", "TaskKind", "get"]


def get(name: str) -> TaskKind:
    if name not in KINDS:
        raise ValueError(f"task type {name!r} is not one of {NAMES}")
    return KINDS[name]
