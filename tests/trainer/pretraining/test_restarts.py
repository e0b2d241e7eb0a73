"""Restarts whose flags change the plan: a start killed before any step, a total
lowered into the warmup, a total equal to the backed-up step, and impossible step counts."""

import json

import keras
import pytest

from tests.trainer.mlm_data import Preempted, preempt_at, task_args
from tests.trainer.pretraining.test_preemption import same_on_every_backend
from trainer.pretraining import task

pytestmark = pytest.mark.slow  # the fast lane (make test-fast) leaves it to make test

PEAK = 1e-2  # task_args' --learning_rate


class _KilledBeforeTheFirstStep(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        raise Preempted(0)


def _run(corpus, out, steps, *extra, callbacks=()):
    args = task_args(corpus, out, "--train_steps", str(steps), "--save_every", "20", *extra)
    return task.run(task.parse_args(args), extra_callbacks=list(callbacks))


def _read(out, name):
    return json.loads((out / name).read_text())


@same_on_every_backend
def test_a_start_killed_before_any_step_is_replanned_from_the_new_flags(corpus, tmp_path):
    with pytest.raises(Preempted):  # killed at step 0 of a long run: run_config, no backup
        _run(
            corpus, tmp_path, 100_000, "--eval_every", "20", callbacks=[_KilledBeforeTheFirstStep()]
        )
    assert _read(tmp_path, "run_config.json")["warmup_steps"] == 5000
    _run(corpus, tmp_path, 40, "--eval_every", "20")
    assert _read(tmp_path, "run_config.json")["warmup_steps"] == 2  # 5 % of 40
    history = _read(tmp_path, "history.json")
    assert history[0]["learning_rate"] == pytest.approx(PEAK * 20 / 38, rel=1e-4)
    assert history[-1]["learning_rate"] == 0.0


@same_on_every_backend
def test_a_total_lowered_into_the_warmup_replans_it_with_one_line(corpus, tmp_path, capsys):
    with pytest.raises(Preempted):  # 20 of 1000 steps trained, inside the 50-step warmup
        _run(corpus, tmp_path, 1000, "--eval_every", "20", callbacks=[preempt_at(20)])
    capsys.readouterr()
    _run(corpus, tmp_path, 40, "--eval_every", "20")
    notes = [line for line in capsys.readouterr().out.splitlines() if "warmup" in line]
    assert len(notes) == 1 and "50" in notes[0] and "2 steps" in notes[0], notes
    assert _read(tmp_path, "run_config.json")["warmup_steps"] == 2
    history = _read(tmp_path, "history.json")
    assert history[-1]["step"] == 40 and history[-1]["learning_rate"] == 0.0


def test_a_total_equal_to_the_backed_up_step_evaluates_and_finishes(corpus, tmp_path, capsys):
    with pytest.raises(Preempted):  # backed up at 20, evaluated only every 40
        _run(corpus, tmp_path, 40, "--eval_every", "40", callbacks=[preempt_at(20)])
    assert "eval_loss" not in _read(tmp_path, "history.json")[-1]
    capsys.readouterr()
    assert (
        task.main(
            task_args(
                corpus, tmp_path, "--train_steps", "20", "--save_every", "20", "--eval_every", "40"
            )
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "already trained 20 steps" in out and "evaluating" in out
    metrics = _read(tmp_path, "metrics.json")
    assert metrics["steps"] == 20 and 0 < metrics["eval_loss"] < 10
    history = _read(tmp_path, "history.json")
    assert [e["step"] for e in history] == [20]
    # The same evaluation as `fit`'s: a run evaluating at 20 logs the same numbers.
    with pytest.raises(Preempted):
        _run(corpus, tmp_path / "ref", 40, "--eval_every", "20", callbacks=[preempt_at(20)])
    reference = _read(tmp_path / "ref", "history.json")[0]
    evaluated = {k: v for k, v in history[0].items() if k.startswith("eval_")}
    assert evaluated.keys() == {k for k in reference if k.startswith("eval_")}
    for key, value in evaluated.items():
        assert value == pytest.approx(reference[key], rel=1e-5), key
    assert metrics["eval_loss"] == history[0]["eval_loss"]


@same_on_every_backend
@pytest.mark.parametrize("flag", ["--train_steps", "--epochs"])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_step_counts_below_one_are_refused_naming_the_flag(corpus, tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as exit_info:
        task.main(task_args(corpus, tmp_path, flag, value))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {flag} must be at least 1"), err
    assert not tmp_path.joinpath("run_config.json").exists()
