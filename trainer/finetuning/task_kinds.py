"""Downstream task kinds: each one record of what differs between kinds, so that a new kind
(token classification, multiple choice) is one record here plus its tests, and no other
module compares a kind's name.

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

import dataclasses
from collections.abc import Callable

import numpy as np

from trainer.finetuning import metrics


@dataclasses.dataclass(frozen=True)
class TaskKind:
    name: str
    card_name: str  # the model card's task name (model-index)
    named_classes: bool  # labels are names of classes (ids by sorted name), else numbers
    metrics: Callable[[int], tuple[str, ...]]  # the metrics reported, given the outputs
    default_metric: str
    outputs: Callable  # (names: tuple | None) -> the head's outputs
    loss: Callable[[str], object]  # (Keras reduction) -> the Keras loss on the head's outputs
    predictions: Callable[[np.ndarray], np.ndarray]  # the head's outputs -> predictions
    scores: Callable  # (targets, predictions, outputs) -> {metric: value or None}
    constant_answers: Callable  # (train targets, outputs) -> every constant answer to try


def _class_predictions(outputs: np.ndarray) -> np.ndarray:
    # A row of non-finite logits has no class: NaN, which `metrics` refuses to score (argmax
    # would call it class 0).
    finite = np.isfinite(outputs).all(-1)
    return outputs.argmax(-1) if finite.all() else np.where(finite, outputs.argmax(-1), np.nan)


def _cross_entropy(reduction: str):
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


def _squared_error(reduction: str):
    import keras

    return keras.losses.MeanSquaredError(reduction=reduction)


CLASSIFICATION = TaskKind(
    name="classification",
    card_name="Text classification",
    named_classes=True,
    metrics=lambda classes: tuple(m for m in metrics.CLASSIFICATION if m != "f1" or classes == 2),
    default_metric="accuracy",
    outputs=lambda names: len(names),
    loss=_cross_entropy,
    predictions=_class_predictions,
    scores=lambda targets, predicted, outputs: metrics.classification_scores(
        targets, predicted, outputs
    ),
    # Each class in turn: dev's majority may be another class than training's.
    constant_answers=lambda train, outputs: [np.int32(c) for c in range(outputs)],
)
REGRESSION = TaskKind(
    name="regression",
    card_name="Text regression",
    named_classes=False,
    metrics=lambda outputs: metrics.REGRESSION,
    default_metric="spearman",
    outputs=lambda names: 1,
    loss=_squared_error,
    predictions=lambda outputs: outputs[:, 0],
    scores=lambda targets, predicted, outputs: metrics.regression_scores(targets, predicted),
    constant_answers=lambda train, outputs: [np.float32(np.mean(train))],  # the training mean
)
KINDS = {kind.name: kind for kind in (CLASSIFICATION, REGRESSION)}
NAMES = tuple(KINDS)  # --task_type's choices


def get(name: str) -> TaskKind:
    if name not in KINDS:
        raise ValueError(f"task type {name!r} is not one of {NAMES}")
    return KINDS[name]
