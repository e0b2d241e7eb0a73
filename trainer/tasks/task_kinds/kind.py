"""What a downstream task kind is: the fields every kind answers (trainer/tasks/task_kinds/
holds one module per kind).

A kind fine-tuned by the classifier's loop (`trainer/finetuning/protocol.py`: one head over a
pooled vector, `model.fit`) fills the head's fields. A kind whose loop differs (embeddings
trained contrastively, a reranker scored on rankings, a tagger scored on entities) names its
`runner` instead: the module of trainer/finetuning that reads its data and fine-tunes it
(`build(config, size, settings) -> [jobs.Job]`, `run_job(runtime, source, backbone, pretrained,
job, watch) -> results document`, `table(document) -> str`), so that `trainer.finetune` stays
one command and no module compares a kind's name.
"""

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
    outputs: Callable | None = None  # (names: tuple | None) -> the head's outputs
    loss: Callable[[str], object] | None = None  # (Keras reduction) -> the Keras loss
    predictions: Callable[[np.ndarray], np.ndarray] | None = None  # outputs -> predictions
    scores: Callable | None = None  # (targets, predictions, outputs) -> {metric: value or None}
    constant_answers: Callable | None = None  # (train targets, outputs) -> constant answers
    runner: str | None = None  # the module of a kind with its own loop (see above)
    card_type: str = "text-classification"  # the Hub's pipeline tag of the task
