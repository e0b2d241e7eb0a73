"""Regression: labels are numbers, a head of one output, squared error, Pearson / Spearman / MSE."""

from __future__ import annotations

import numpy as np

from trainer.tasks import metrics
from trainer.tasks.task_kinds.kind import TaskKind


def _squared_error(reduction: str):
    import keras

    return keras.losses.MeanSquaredError(reduction=reduction)


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
