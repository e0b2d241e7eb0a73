"""The run plan: pure arithmetic of intervals, resume segments and what a restart may change."""

import pytest

from tests.trainer.mlm_data import saved_run
from trainer.pretraining.plan import (
    DEFAULT_LEARNING_RATES,
    PlanError,
    TrainPlan,
    check_continuation,
    check_start,
    learning_rate,
    make_plan,
    warmup_change,
)


def test_intervals_divide_save_eval_and_total():
    plan = make_plan(
        1000, save_every=200, eval_every=500, steps_per_execution=100, warmup_ratio=0.05
    )
    assert (plan.interval, plan.steps_per_execution, plan.warmup_steps) == (100, 100, 50)
    assert plan.segments(0) == [(0, 10, 100)]
    assert plan.eval_epochs(0, 10, 100) == [5, 10]


def test_a_resume_off_the_intervals_first_reaches_a_boundary():
    # Killed at 900 with --save_every 300; resumed with --save_every 400 --eval_every 400.
    plan = make_plan(
        2000, save_every=400, eval_every=400, steps_per_execution=100, warmup_ratio=0.0
    )
    assert plan.interval == 400
    assert plan.segments(900) == [(900, 1, 300), (1200, 2, 400)]
    assert plan.eval_epochs(900, 1, 300) == [1]  # 1200 is a multiple of 400
    assert plan.eval_epochs(1200, 2, 400) == [1, 2]  # 1600, 2000
    assert plan.steps_per_execution_from(900) == 100
    assert make_plan(2000, 400, 400, 64, 0.0).steps_per_execution_from(900) == 4


def test_the_last_segment_ends_at_the_total_and_a_finished_run_has_none():
    plan = TrainPlan(
        total_steps=150, interval=50, steps_per_execution=1, warmup_steps=0, eval_every=50
    )
    assert plan.segments(120) == [(120, 1, 30)]
    assert plan.segments(150) == []


def test_warmup_is_kept_from_the_first_plan():
    assert make_plan(200, 40, 40, 1, 0.05, saved=saved_run(warmup_steps=6)).warmup_steps == 6
    assert make_plan(200, 40, 40, 1, 0.05, saved=saved_run()).warmup_steps == 10


def test_a_total_inside_the_saved_warmup_replans_it_so_the_rate_reaches_zero():
    saved = saved_run(warmup_steps=50_000)  # planned for 1,000,000 steps
    plan = make_plan(40, 20, 20, 1, 0.05, saved=saved)
    assert plan.warmup_steps == 2
    assert "warmup of 50000 steps: warmup re-planned to 2 steps" in warmup_change(saved, plan)
    assert make_plan(50_000, 1000, 1000, 1, 0.05, saved=saved).warmup_steps == 2500
    kept = make_plan(50_001, 1, 1, 1, 0.05, saved=saved)
    assert kept.warmup_steps == 50_000 and warmup_change(saved, kept) is None
    assert warmup_change(None, plan) is None  # a new run (or one that never trained)


def test_data_order_and_objective_are_fixed():
    saved = {"shuffle_buffer_size": 65536, "masking": "token", "mlm_probability": 0.15}
    for key, value in (("shuffle_buffer_size", 100), ("masking", "span"), ("mlm_probability", 0.2)):
        with pytest.raises(PlanError, match=f"flag: --{key}"):
            check_continuation(saved, dict(saved, **{key: value}), "out")


def test_fixed_settings_are_refused_naming_the_flag():
    saved = {"seed": 42, "global_batch_size": 256, "family": "roberta", "total_steps": 100}
    check_continuation(saved, dict(saved, total_steps=200), "out")  # steps may change
    check_continuation(None, {"seed": 1}, "out")  # a new run
    with pytest.raises(PlanError, match=r"another seed \(42 there, 7 now; flag: --seed\)"):
        check_continuation(saved, dict(saved, seed=7), "out")
    with pytest.raises(PlanError, match="per_replica_batch_size x replicas"):
        check_continuation(saved, dict(saved, global_batch_size=128), "out")


def test_fewer_steps_than_done_is_refused():
    check_start(100, 100, "out")
    with pytest.raises(PlanError, match="already trained 120 steps, more than the 100"):
        check_start(120, 100, "out")


def test_learning_rate_default_by_size_flag_wins_and_a_resumed_run_keeps_its_rate():
    assert learning_rate(None, "tiny", None) == DEFAULT_LEARNING_RATES["tiny"]
    assert learning_rate(None, "base", None) == DEFAULT_LEARNING_RATES["base"]
    assert DEFAULT_LEARNING_RATES["tiny"] > DEFAULT_LEARNING_RATES["base"]
    started = saved_run(learning_rate=1e-4)
    assert learning_rate(3e-4, "tiny", started) == 3e-4  # explicit flag
    assert learning_rate(None, "tiny", started) == 1e-4  # started with it


def test_pod_hosts_that_see_another_run_are_refused_alike_in_one_line():
    """(the mechanism; tests/trainer/pretraining/test_pod.py runs it on two processes)."""
    from trainer.pretraining.plan import check_hosts_agree
    from trainer.training.hosts import digest

    weights, now = ["runs/x/backup/state-00000020.weights.h5"], {"seed": 1}
    check_hosts_agree(None, weights, None, now)  # one process: nothing to compare
    check_hosts_agree(lambda values: [values, list(values)], weights, None, now)
    other = [0, digest({"saved": None, "now": {"seed": 1}, "weights": []})]
    with pytest.raises(PlanError) as err:
        check_hosts_agree(lambda values: [values, other], weights, None, now)
    message = str(err.value)
    assert "\n" not in message and "host 0 sees step 20" in message
    assert "host 1 sees step 0" in message and "same --output_dir" in message
