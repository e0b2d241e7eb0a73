"""Classification: labels name classes (ids by sorted name), a head of one output per class,
cross-entropy, the argmax, accuracy / F1 / macro-F1 / MCC."""

from __future__ import annotations

import numpy as np

from trainer.tasks import metrics
from trainer.tasks.task_kinds.kind import TaskKind


def _class_predictions(outputs: np.ndarray) -> np.ndarray:
    # A row of non-finite logits has no class: NaN, which `metrics` refuses to score (argmax
    # would call it class 0).
    finite = np.isfinite(outputs).all(-1)
    return outputs.argmax(-1) if finite.all() else np.where(finite, outputs.argmax(-1), np.nan)


def _cross_entropy(reduction: str):
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


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
