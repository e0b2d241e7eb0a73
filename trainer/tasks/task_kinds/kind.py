"""What a downstream task kind is: the fields every kind answers (trainer/tasks/task_kinds/
holds one module per kind)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np


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
