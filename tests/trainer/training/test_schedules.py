"""Warmup-stable-decay: the schedule's values, its plan and flags, and family recipes (all
fast: no training; the restarts are in test_decay_restarts.py)."""

import dataclasses
import math

import numpy as np
import pytest

from tests.trainer.mlm_data import saved_run, task_args
from trainer import families
from trainer.families import recipe_flags
from trainer.pretraining import pretrain_recipe, task
from trainer.pretraining.config import parse_args
from trainer.pretraining.plan import DecayFlags, PlanError, TrainPlan, check_decay_start, make_plan
from trainer.training.optimizer import WarmupLinearDecay, build_optimizer
from trainer.training.schedules import WarmupStableDecay

FAKE = {"train": "no-train", "eval": "no-eval", "tokenizer": "no-tokenizer"}


def test_warmup_then_the_peak_held_then_a_one_minus_sqrt_decay_to_zero():
    schedule = WarmupStableDecay(1e-3, warmup_steps=10, decay_start=60, decay_steps=40)
    steps = [0, 5, 10, 30, 60, 70, 90, 100, 130]
    expected = [0, 5e-4, 1e-3, 1e-3, 1e-3]
    expected += [1e-3 * (1 - math.sqrt(s / 40)) for s in (10, 30, 40)] + [0.0]
    np.testing.assert_allclose([float(schedule(s)) for s in steps], expected, rtol=1e-6, atol=1e-12)
    assert WarmupStableDecay(**schedule.get_config()).get_config() == schedule.get_config()


def test_the_schedule_counts_updates_under_accumulation_and_a_zero_decay_holds_the_peak():
    plain = WarmupStableDecay(1e-3, 10, 60, 40)
    accumulated = WarmupStableDecay(1e-3, 10, 60, 40, micro_batches=4)
    for update in (0, 7, 10, 59, 75, 100):
        for micro in range(4):
            assert float(accumulated(4 * update + micro)) == float(plain(update))
    held = WarmupStableDecay(1e-3, 10, 100, 0)  # --decay_ratio 0: a stable phase
    assert [float(held(s)) for s in (50, 99, 100)] == pytest.approx([1e-3] * 3)
    with pytest.raises(ValueError, match="inside the warmup"):
        WarmupStableDecay(1e-3, 10, 5, 10)


def test_build_optimizer_takes_the_wsd_schedule_only_when_asked():
    assert isinstance(build_optimizer(1e-3, 100, 10)._learning_rate, WarmupLinearDecay)
    wsd = build_optimizer(1e-3, 100, 10, grad_accum_steps=2, decay=(80, 20))._learning_rate
    assert isinstance(wsd, WarmupStableDecay)
    assert (wsd.decay_start, wsd.decay_steps, wsd.micro_batches) == (80, 20, 2)


def test_the_plan_places_the_decay_by_ratio_or_by_the_flags():
    plan = make_plan(1000, 100, 100, 1, 0.05, decay=DecayFlags(0.2))
    assert (plan.warmup_steps, plan.decay) == (50, (800, 200))
    assert make_plan(1003, 1003, 1003, 1, 0.0, decay=DecayFlags(0.2)).decay == (803, 200)
    saved = saved_run(warmup_steps=50)
    explicit = make_plan(700, 100, 100, 1, 0.05, saved, DecayFlags(0.2, 600, 100))
    assert (explicit.warmup_steps, explicit.decay) == (50, (600, 100))
    assert make_plan(1000, 100, 100, 1, 0.05).decay is None  # linear
    with pytest.raises(PlanError, match="inside the warmup of 500 steps"):
        make_plan(1000, 100, 100, 1, 0.5, decay=DecayFlags(0.6))


def test_a_decay_before_the_resume_step_is_refused_unless_the_run_already_decayed_from_it():
    plan = TrainPlan(80, 20, 1, 2, 20, decay_start=40, decay_steps=40)
    check_decay_start(saved_run(decay_start_step=0), plan, 40, "run", from_step=40)  # S = R
    check_decay_start(saved_run(decay_start_step=40), plan, 60, "run", from_step=40)  # resumed
    check_decay_start(None, plan, 60, "run", from_step=None)  # placed by --decay_ratio
    for saved in (saved_run(decay_start_step=80), saved_run(decay_start_step=None), None):
        with pytest.raises(PlanError) as refused:
            check_decay_start(saved, plan, 60, "run", from_step=40)
        assert "trained 60 steps without decaying from step 40" in str(refused.value)
        assert "--decay_from_step must be at least 60" in str(refused.value)


def _refused(tmp_path, capsys, *extra) -> str:
    out = tmp_path / "out"
    try:
        code = task.main(task_args(FAKE, out, *extra))
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert not out.exists()
    return err[0]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--decay_from_step", "10"], "give --decay_from_step and --decay_steps together"),
        (
            ["--decay_from_step", "10", "--decay_steps", "5", "--train_steps", "20"],
            "--train_steps 20, but the decay ends at step 15",
        ),
        (["--decay_from_step", "10", "--decay_steps", "5", "--epochs", "1"], "drop --epochs"),
        (["--decay_ratio", "1.5", "--train_steps", "5"], "--decay_ratio must be in [0, 1]"),
        (["--schedule", "cosine", "--train_steps", "5"], "argument --schedule: invalid choice"),
    ],
)
def test_decay_flags_that_cannot_work_are_one_line(tmp_path, capsys, flags, message):
    assert message in _refused(tmp_path, capsys, *flags)


def test_decay_flags_end_the_run_and_need_the_wsd_schedule(tmp_path, capsys):
    config = parse_args(task_args(FAKE, tmp_path, "--decay_from_step", "10", "--decay_steps", "5"))
    assert config.schedule.train_steps == 15
    with pytest.raises(PlanError, match="pass --schedule wsd"):
        pretrain_recipe.apply(config, {}, None)
    assert pretrain_recipe.apply(config, {"schedule": "wsd"}, None).schedule.schedule == "wsd"


def plain_flags(tmp_path):
    return parse_args(task_args(FAKE, tmp_path, "--train_steps", "5"))


def test_a_flag_wins_then_the_resumed_run_then_the_family_recipe_then_the_default(tmp_path):
    recipe = {"mlm_probability": 0.3, "schedule": "wsd", "update_clipping": "on"}
    parsed = parse_args(task_args(FAKE, tmp_path, "--train_steps", "5", "--mlm_probability", "0.2"))
    # The recipe flags span three parts: read flat, as run_config.json records them.
    given = parsed.to_dict()
    assert given["schedule"] is None and given["adam_beta2"] is None  # left open
    chosen = pretrain_recipe.apply(parsed, recipe, None).to_dict()
    assert (chosen["mlm_probability"], chosen["schedule"], chosen["update_clipping"]) == (
        0.2,
        "wsd",
        "on",
    )
    assert (chosen["adam_beta2"], chosen["adam_epsilon"], chosen["decay_ratio"]) == (
        0.98,
        1e-6,
        0.2,
    )
    saved = saved_run(schedule="linear", adam_beta2=0.95)
    resumed = pretrain_recipe.apply(parsed, recipe, saved).to_dict()
    assert (resumed["schedule"], resumed["adam_beta2"], resumed["update_clipping"]) == (
        "linear",
        0.95,
        "on",
    )
    # Without a recipe every value is today's default: existing runs train as before.
    plain = pretrain_recipe.apply(plain_flags(tmp_path), {}, None).to_dict()
    assert {name: plain[name] for name in recipe_flags.FLAGS} == recipe_flags.DEFAULTS
    with pytest.raises(ValueError, match="--mlm_probability must be in"):  # a recipe's too
        pretrain_recipe.apply(plain_flags(tmp_path), {"mlm_probability": 2.0}, None)


def test_a_family_recipe_names_only_recipe_flags_with_valid_choices():
    roberta = families.get("roberta")
    assert roberta.pretraining_recipe == {} and families.get("bert").pretraining_recipe == {}
    with pytest.raises(ValueError, match="names \\['mlm_rate'\\]"):
        dataclasses.replace(roberta, pretraining_recipe={"mlm_rate": 0.3})
    with pytest.raises(ValueError, match="schedule 'cosine' is not one of"):
        dataclasses.replace(roberta, pretraining_recipe={"schedule": "cosine"})
