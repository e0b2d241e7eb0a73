"""Every number a run derives from its flags, the devices and the saved run: pure, no model.

The resume point is never computed here from flags: it is the optimizer step stored in the
backup (`trainer.models.checkpoints.restore_state`). Given it, `segments` lays out the `fit`
calls so that checkpoints and evaluations fall on multiples of --save_every / --eval_every and on
the last step, whatever those flags were in earlier attempts.

Example:
    >>> plan = TrainPlan(total_steps=1000, interval=200, steps_per_execution=100,
    ...                  warmup_steps=50)
    >>> plan.segments(start_step=500)     # (first step, intervals, steps per interval)
    [(500, 1, 100), (600, 2, 200)]
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from common import fs
from common.errors import UserError
from trainer.run_folder import run_dir
from trainer.training import hosts

if TYPE_CHECKING:  # the plan reads a saved run's fields; importing the record imports Keras
    from trainer.run_folder.run_record import RunRecord

# Settings of a run that a restart must not change, and the flag a user changes for each.
FIXED = {
    "family": "--family",
    # Before the backbone, whose sequence length follows the data's: new data names its flag.
    "max_length": "--max_length",
    "backbone_config": "--model / --config",
    "tokenizer": "--tokenizer",
    "seed": "--seed",
    "global_batch_size": "--per_replica_batch_size x replicas x --grad_accum_steps",
    "train_data_digest": "--train_data (its manifest changed)",
    "input_pipelines": "number of hosts (input pipelines)",
    "backend": "--backend",
    # The data order and the objective from the resume step on: a changed shuffle buffer
    # would draw another permutation, so the examples before the resume position would no
    # longer be the ones already seen.
    "shuffle_buffer_size": "--shuffle_buffer_size",
    "masking": "--masking",
    "mlm_probability": "--mlm_probability",
    "init_from": "--init_from (the model it started from, by path and sha256)",
}


# Peak learning rates by size when --learning_rate is not given. tiny/small: the CPU sweep in
# docs/training.md "Learning rate" (benchmarks/lr_sweep.py); base/large: RoBERTa's settings (Liu et
# al. 2019, 6e-4 base / 4e-4 large at 8K-sequence batches), lowered for our ~1K batches.
DEFAULT_LEARNING_RATES = {"tiny": 2e-3, "small": 5e-4, "base": 5e-4, "large": 3e-4}


# Continued pretraining (--init_from), whatever the size: the peak rate of Gururangan et al.
# 2020's task-adaptive runs (allenai/dont-stop-pretraining ADAPTIVE_PRETRAINING.md: 1e-4 at
# 256-sequence batches; their domain-adaptive runs used 5e-4 at 2,048), the published point
# nearest our batches; a model already at a minimum is not retrained from a high rate.
CONTINUED_LEARNING_RATE = 1e-4


def learning_rate(
    explicit: float | None, size: str, saved: RunRecord | None, continued: bool = False
) -> float:
    """An explicit flag wins; else a resumed run keeps the rate it started with (a new
    default must not change a run half-way); else the default of continued training or of
    the size."""
    if explicit is not None:
        return explicit
    if saved and saved.recipe.learning_rate is not None:
        return saved.recipe.learning_rate
    if continued:
        return CONTINUED_LEARNING_RATE
    return DEFAULT_LEARNING_RATES.get(size, DEFAULT_LEARNING_RATES["base"])


class PlanError(UserError):
    """Flags that cannot continue the saved run; one line naming the flag."""


@dataclasses.dataclass(frozen=True)
class TrainPlan:
    total_steps: int
    interval: int  # steps per Keras epoch: divides --save_every, --eval_every and the total
    steps_per_execution: int
    warmup_steps: int
    eval_every: int = 1
    # The 1 - sqrt decay of --schedule wsd: its first step and length; None for linear.
    decay_start: int | None = None
    decay_steps: int | None = None
    # Where a phase after phase 0 begins (--phases): a `fit` call never spans two, so each
    # reads one phase's data stream at one masking rate.
    phase_starts: tuple = ()

    @property
    def decay(self) -> tuple[int, int] | None:
        return None if self.decay_start is None else (self.decay_start, self.decay_steps)

    def segments(self, start_step: int) -> list[tuple[int, int, int]]:
        """`fit` calls as (first step, intervals, steps per interval): one short call to
        reach the next interval boundary when an earlier attempt used other intervals."""
        out, step = [], start_step
        if step % self.interval:
            length = min(self.interval - step % self.interval, self.total_steps - step)
            out.append((step, 1, length))
            step += length
        if step < self.total_steps:
            out.append((step, (self.total_steps - step) // self.interval, self.interval))
        return self._split_at_phases(out)

    def _split_at_phases(self, segments: list) -> list[tuple[int, int, int]]:
        """`segments` with each interval that holds a phase start cut there, in two calls."""
        out = []
        for first, intervals, length in segments:
            for i in range(intervals):
                begin, end = first + i * length, first + (i + 1) * length
                cuts = [s for s in self.phase_starts if begin < s < end]
                if not cuts:
                    out.append((begin, 1, length))
                    continue
                edges = [begin, *cuts, end]
                out += [(a, 1, b - a) for a, b in zip(edges, edges[1:])]
        return _merged(out, self.phase_starts) if self.phase_starts else segments

    def eval_epochs(self, first_step: int, intervals: int, length: int) -> list[int]:
        """1-based epochs of one `fit` call after which to evaluate."""
        return [
            i
            for i in range(1, intervals + 1)
            if (first_step + i * length) % self.eval_every == 0
            or first_step + i * length == self.total_steps
        ]

    def steps_per_execution_from(self, start_step: int) -> int:
        """Compiled steps per call: must divide every interval of `segments(start_step)`."""
        return math.gcd(self.steps_per_execution, self.interval, start_step, *self.phase_starts)


def _merged(segments: list, phase_starts: tuple) -> list[tuple[int, int, int]]:
    """Runs of consecutive one-interval calls of one length joined into one call (fewer
    `fit` calls; the epochs, hence the interval ends, are the same), never across the start
    of a phase."""
    out = []
    for first, intervals, length in segments:
        joins = out and out[-1][2] == length and out[-1][0] + out[-1][1] * length == first
        if joins and first not in phase_starts:
            out[-1] = (out[-1][0], out[-1][1] + intervals, length)
        else:
            out.append((first, intervals, length))
    return out


def make_plan(
    total_steps: int,
    save_every: int,
    eval_every: int,
    steps_per_execution: int,
    warmup_ratio: float,
    saved: RunRecord | None = None,
    decay: DecayFlags | None = None,
    phase_starts: tuple = (),
) -> TrainPlan:
    """The plan of this attempt; `saved` is the record of a run that has trained (None
    for a new run, or one killed before its first backup: that one is planned afresh);
    `decay` the flags of a warmup-stable-decay schedule (None: linear decay); `phase_starts`
    the steps where --phases switches data or masking rate."""
    interval = math.gcd(save_every, eval_every, total_steps)
    warmup = warmup_steps(total_steps, warmup_ratio, saved)
    start, length = decay_phase(total_steps, warmup, decay) if decay else (None, None)
    return TrainPlan(
        total_steps,
        interval,
        min(steps_per_execution, interval),
        warmup,
        eval_every,
        start,
        length,
        tuple(phase_starts),
    )


@dataclasses.dataclass(frozen=True)
class DecayFlags:
    """--decay_ratio, or --decay_from_step with --decay_steps (which then win)."""

    ratio: float
    from_step: int | None = None
    steps: int | None = None


def decay_phase(total_steps: int, warmup: int, decay: DecayFlags) -> tuple[int, int]:
    """(first step, length) of the 1 - sqrt decay: the flags' own, else the last
    `ratio` of the run (rounded down, as the warmup; Hägele et al.'s `int(fract * n)`)."""
    if decay.from_step is not None:
        start, length = decay.from_step, decay.steps
    else:
        length = int(decay.ratio * total_steps)
        start = total_steps - length
    if start < warmup:
        raise PlanError(
            f"the decay would start at step {start}, inside the warmup of {warmup} steps: "
            "lower --decay_ratio or --warmup_ratio, or give a later --decay_from_step"
        )
    return start, length


def check_decay_start(
    saved: RunRecord | None, plan: TrainPlan, start_step: int, where: str, from_step: int | None
) -> None:
    """--decay_from_step S (`from_step`; None: not given) before the resume step R is
    refused, unless the saved run was already decaying from S (a restart inside the decay):
    its steps from S to R were trained at the stable rate, which no decay from S gives them.
    (A decay placed by --decay_ratio is re-planned with the total, as the linear decay is.)"""
    if from_step is None or plan.decay_start >= start_step:
        return
    if saved and saved.recipe.decay_start_step == plan.decay_start:
        return
    raise PlanError(
        f"{where} has trained {start_step} steps without decaying from step "
        f"{plan.decay_start}; --decay_from_step must be at least {start_step} (to decay "
        "from an earlier step, restart a copy of the run folder holding that step's backup)"
    )


def warmup_steps(total_steps: int, warmup_ratio: float, saved: RunRecord | None) -> int:
    """The first attempt's warmup, so extending --train_steps re-plans only the decay, with
    no second warmup; unless the new total ends inside it, where the rate would still be
    rising at the last step: then the warmup of a run planned for the new total."""
    warmup = saved.recipe.warmup_steps if saved else None
    if warmup is None or warmup >= total_steps:
        return int(warmup_ratio * total_steps)
    return warmup


def warmup_change(saved: RunRecord | None, plan: TrainPlan) -> str | None:
    """The line that says a trained run's warmup was re-planned, or None."""
    old = saved.recipe.warmup_steps if saved else None
    if old is None or old == plan.warmup_steps:
        return None
    return (
        f"--train_steps {plan.total_steps} ends inside this run's warmup of {old} steps: "
        f"warmup re-planned to {plan.warmup_steps} steps, so that the learning rate "
        f"decays to zero at step {plan.total_steps}."
    )


def check_continuation(saved: dict | None, now: dict, where: str) -> None:
    """Refuses flags that change a FIXED setting of the saved run, naming the flag: key by
    key, over the run configs as saved (`RunRecord.raw`) and as this attempt writes it."""
    for key, flag in FIXED.items():
        if saved is None or key not in saved or saved[key] == now.get(key):
            continue
        raise PlanError(
            f"{where} holds a run with another {key} ({_short(saved[key])} there, "
            f"{_short(now.get(key))} now; flag: {flag}); use a new --output_dir or the same "
            "settings."
        )


def check_accumulation(backend: str, replicas: int, grad_accum_steps: int) -> None:
    """Keras' gradient accumulation applies the update inside a conditional, and
    tf.distribute cannot synchronise replicas there (the step fails to build: a `merge_call`
    inside a cond); on JAX, and on TensorFlow with one replica, it works."""
    if grad_accum_steps > 1 and backend == "tensorflow" and replicas > 1:
        raise PlanError(
            f"--grad_accum_steps {grad_accum_steps} with {replicas} replicas needs the JAX "
            "backend (--backend jax): Keras accumulates gradients on TensorFlow with one "
            "replica only."
        )


def check_start(start_step: int, total_steps: int, where: str) -> None:
    if start_step > total_steps:
        raise PlanError(
            f"{where} has already trained {start_step} steps, more than the {total_steps} "
            "asked for; pass --train_steps (or --epochs) of at least that many."
        )


def check_hosts_agree(gather, weights: list[str], saved, run_config: dict) -> None:
    """On a pod every process must continue the same run from the same step: restoring the
    backup and every train step are collectives. Each host gives the newest step its run
    folder holds `weights` of and a digest of what it continues (the saved record, the new run
    config, the weight files). Hosts that see different run folders (a local --output_dir on a
    multi-host slice) or run different commands are refused here, on every host alike, before
    any collective and before any file is written."""
    newest = max((run_dir.step_of(path) or 0 for path in weights), default=0)
    run = {
        "saved": saved.raw if saved else None,
        "now": run_config,
        "weights": [fs.basename(p) for p in weights],
    }
    seen = hosts.disagreement(gather, [newest, hosts.digest(run)])
    if seen is None:
        return
    said = ", ".join(
        f"host {i} sees step {step} (run {value:07x})" for i, (step, value) in enumerate(seen)
    )
    raise PlanError(
        f"the pod's hosts disagree on the run to continue: {said}; every host must see the "
        "same --output_dir (on a multi-host slice a gs:// folder, not a local disk) and run "
        "the same command."
    )


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
