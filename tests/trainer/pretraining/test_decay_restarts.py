"""Warmup-stable-decay runs: a run held at its peak (stable phase) restarted to decay from
its step S over D updates, killed inside the decay and resumed; and a family's pretraining
recipe applied by a run and recorded in run_config.json."""

import dataclasses
import json
import math

import pytest

from tests.trainer.mlm_data import Preempted, preempt_at, task_args
from tests.trainer.pretraining.test_preemption import same_on_every_backend
from trainer import families
from trainer.pretraining import task

# Trainings: left to make test; and plan arithmetic, the same whatever the backend, so the
# JAX pass leaves them to the TensorFlow pass (the optimizer's JAX path: test_update_clipping).
pytestmark = [pytest.mark.slow, same_on_every_backend]

PEAK = 1e-2  # task_args' --learning_rate
INTERVALS = ["--save_every", "10", "--eval_every", "10"]
STABLE = ["--schedule", "wsd", "--decay_ratio", "0", "--train_steps", "20", *INTERVALS]
DECAY = ["--schedule", "wsd", "--decay_from_step", "20", "--decay_steps", "20", *INTERVALS]


def _read(out, name):
    return json.loads((out / name).read_text())


def _rates(out) -> dict:
    return {e["step"]: e["learning_rate"] for e in _read(out, "history.json")}


def test_a_stable_run_decays_from_its_step_and_resumes_exactly_inside_the_decay(
    corpus, tmp_path, capsys
):
    out = tmp_path / "run"
    assert task.main(task_args(corpus, out, *STABLE, "--update_clipping", "on")) == 0
    assert _rates(out) == pytest.approx({10: PEAK, 20: PEAK})  # warmup 1 step, then held

    # Decaying from an earlier step than the run has trained is refused, touching nothing.
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    early = ["--schedule", "wsd", "--decay_from_step", "10", "--decay_steps", "10", *INTERVALS]
    assert task.main(task_args(corpus, out, *early)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--decay_from_step must be at least 20" in err[0], err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

    # The decay (update clipping still on: the resumed run's value), preempted once its
    # backup of step 30, inside the decay, is written. Then the same command again.
    args = task_args(corpus, out, *DECAY)
    with pytest.raises(Preempted):
        task.run(task.parse_args(args), extra_callbacks=[preempt_at(30)])
    assert _read(out, "run_config.json")["attempts"][-1]["start_step"] == 20
    assert task.main(args) == 0

    decayed = [PEAK * (1 - math.sqrt(s / 20)) for s in (10, 20)]
    assert _rates(out) == pytest.approx({10: PEAK, 20: PEAK, 30: decayed[0], 40: decayed[1]})
    run_config = _read(out, "run_config.json")
    assert (run_config["schedule"], run_config["update_clipping"]) == ("wsd", "on")
    assert (run_config["decay_start_step"], run_config["decay_num_steps"]) == (20, 20)
    recorded = [
        (a["start_step"], a["schedule"], a["decay_start_step"], a["decay_num_steps"])
        for a in run_config["attempts"]
    ]
    assert recorded == [(0, "wsd", 20, 0), (20, "wsd", 20, 20), (30, "wsd", 20, 20)]
    assert _read(out, "metrics.json")["steps"] == 40


def test_a_family_recipe_sets_the_defaults_a_command_leaves_open(corpus, tmp_path, monkeypatch):
    """A fake record (bert with a recipe) stands for a family that carries one: the run takes
    its values where no flag is given, the flag where one is, and records both."""
    recipe = {
        "mlm_probability": 0.3,
        "adam_beta2": 0.95,
        "adam_epsilon": 1e-7,
        "schedule": "wsd",
        "decay_ratio": 0.5,
        "update_clipping": "on",
    }
    bert = dataclasses.replace(families.get("bert"), pretraining_recipe=recipe)
    registry = families._registry()
    monkeypatch.setattr(families, "_registry", lambda: {**registry, "bert": bert})
    args = task_args(corpus, tmp_path, "--family", "bert", "--adam_beta2", "0.99")
    assert task.main([*args, "--train_steps", "20", *INTERVALS]) == 0
    run_config = _read(tmp_path, "run_config.json")
    chosen = {name: run_config[name] for name in recipe}
    assert chosen == {**recipe, "adam_beta2": 0.99}
    assert (run_config["decay_start_step"], run_config["decay_num_steps"]) == (10, 10)
    assert _rates(tmp_path)[20] == 0.0
