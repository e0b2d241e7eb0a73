"""The fine-tuning task kinds: one record each, asked by every module that differs by kind."""

import dataclasses
import importlib
import pathlib

import numpy as np
import pytest

import trainer
from tests.trainer.families.test_families import _string_constants
from trainer.tasks import metrics, task_kinds

HEAD_KINDS = [name for name in task_kinds.NAMES if not task_kinds.get(name).runner]
RUNNER_KINDS = [name for name in task_kinds.NAMES if task_kinds.get(name).runner]


def test_both_sorts_of_kind_exist():
    assert HEAD_KINDS and RUNNER_KINDS


@pytest.mark.parametrize("name", HEAD_KINDS)
def test_every_head_kind_answers_every_field(name):
    kind = task_kinds.get(name)
    for field in dataclasses.fields(kind):
        if field.name != "runner":
            assert getattr(kind, field.name) is not None, f"{name} leaves {field.name} empty"
    outputs = kind.outputs(("a", "b", "c"))
    assert kind.default_metric in kind.metrics(outputs)
    assert set(kind.metrics(outputs)) <= set(metrics.HIGHER_IS_BETTER)
    logits = np.array([[0.2, 1.0, -1.0], [3.0, 0.0, 0.5]], np.float32)[:, :outputs]
    predicted = kind.predictions(logits)
    targets = predicted.astype(np.int32 if kind.named_classes else np.float32)
    scores = kind.scores(targets, predicted, outputs)
    assert set(scores) == set(kind.metrics(outputs))
    assert kind.constant_answers(np.array([1.0, 2.0, 0.0]), outputs)
    assert kind.loss("sum") is not None and kind.card_name


@pytest.mark.parametrize("name", RUNNER_KINDS)
def test_a_kind_with_its_own_loop_names_a_runner_that_answers(name):
    kind = task_kinds.get(name)
    assert kind.default_metric in kind.metrics(1)
    assert set(kind.metrics(1)) <= set(metrics.HIGHER_IS_BETTER)
    assert kind.card_name and kind.card_type
    runner = importlib.import_module(kind.runner)
    for function in ("build", "run_job", "table"):
        assert callable(getattr(runner, function)), f"{kind.runner} has no {function}"


def test_an_unknown_kind_is_one_line():
    with pytest.raises(ValueError, match="'ner' is not one of"):
        task_kinds.get("ner")


def test_no_kind_is_named_outside_its_record():
    """Code asks the record; adding a kind is one module in trainer/tasks/task_kinds/."""
    root = pathlib.Path(trainer.__file__).parent
    found = [
        f"{path.relative_to(root)}:{line}: {value!r}"
        for path in sorted(root.rglob("*.py"))
        if "task_kinds" not in path.relative_to(root).parts
        for line, value in _string_constants(path)
        if value in task_kinds.NAMES
    ]
    assert not found, "task kind named outside trainer/tasks/task_kinds/: " + "; ".join(found)
