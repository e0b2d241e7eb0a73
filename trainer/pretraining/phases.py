"""`--phases`: a run that switches its training data and masking rate at given steps, as
recent encoder recipes do (mmBERT masks 30 %, then 15 %, then 5 % of tokens, reading another
mixture in its decay phase; Ettin's decay phase reads a higher-quality mixture at 15 %).

A phase is (start step, training-data folder, masking rate). Phase 0 is the run's own
--train_data and --mlm_probability; the flag adds the others, `;`-separated, each
`STEP:DATA:RATE` (DATA empty: the previous phase's data reads on; RATE empty or left out with
its colon: the previous phase's rate). DATA may hold colons itself (gs://...): the step is
what precedes the first colon, the rate what follows the last one when it reads as a number.

The data stream of a phase that names a folder starts at that folder's beginning at the
phase's start step (its `data_start_step`, the idea --extend_context introduced for the whole
run); a phase that keeps the data goes on reading the stream it inherits. Every stream is a
function of (seed, its start, the step), so a resume at any step reads what an uninterrupted
run reads, and the masking keys, keyed by the run's own step, run on across phases.

A restart may change or add phases that have not trained a step yet (they start at or after
the resume step: nothing trained depends on them); a phase that has trained is fixed.

Example:
    >>> parse("30000:gs://b/decay/train:0.15;60000::0.05")
    (PhaseFlag(start_step=30000, train_data='gs://b/decay/train', mlm_probability=0.15),
     PhaseFlag(start_step=60000, train_data=None, mlm_probability=0.05))
"""

from __future__ import annotations

import dataclasses
import re
import time

from common.errors import UserError
from trainer.data import splits
from trainer.pretraining.plan import PlanError

# What a phase is, in run_config.json's `data_phases`: the keys that a restart compares.
IDENTITY = ("start_step", "train_data_digest", "data_start_step", "mlm_probability")


@dataclasses.dataclass(frozen=True)
class PhaseFlag:
    """One phase as the flag gives it; None: as the phase before it."""

    start_step: int
    train_data: str | None
    mlm_probability: float | None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _entry(text: str, number: int) -> PhaseFlag:
    where = f"--phases: phase {number} ({text!r})"
    step, colon, rest = text.partition(":")
    if not colon or not re.fullmatch(r"-?\d+", step.strip()):
        raise ValueError(f"{where} is not STEP:DATA:RATE with STEP a whole number")
    data, rate = rest, ""
    head, colon, tail = rest.rpartition(":")
    if colon and (not tail.strip() or _number(tail) is not None):
        data, rate = head, tail.strip()
    data = data.strip() or None
    if rate and not 0 < _number(rate) < 1:
        raise ValueError(f"{where}: the masking rate must be in (0, 1) (got {rate})")
    if data is None and not rate:
        raise ValueError(f"{where} changes neither the data nor the masking rate")
    return PhaseFlag(int(step), data, float(rate) if rate else None)


def parse(text: str | None) -> tuple[PhaseFlag, ...]:
    """The flag's phases, in order; ValueError (one line) for bad syntax, a start step that is
    not positive and increasing, or a rate outside (0, 1)."""
    entries = [e.strip() for e in (text or "").split(";") if e.strip()]
    found = tuple(_entry(e, i) for i, e in enumerate(entries, 1))
    last = 0
    for i, phase in enumerate(found, 1):
        if phase.start_step <= last:
            raise ValueError(
                f"--phases: phase {i} starts at step {phase.start_step}; each phase must start "
                f"after step {last} (phase 0, the run's own --train_data, starts at step 0)"
            )
        last = phase.start_step
    return found


def load(flags: tuple[PhaseFlag, ...], tokenizer_info, max_length: int) -> tuple:
    """(flag, its SplitSource or None) per phase: each folder validated as --train_data is
    (a prepared split with the run's tokenizer and sequence length); one line naming it."""
    out = []
    for number, phase in enumerate(flags, 1):
        source = None
        if phase.train_data:
            try:
                source = splits.resolve_split(phase.train_data, tokenizer_info, max_length)
            except UserError as err:
                raise PlanError(f"--phases: phase {number} ({phase.train_data}): {err}") from None
        out.append((phase, source))
    return tuple(out)


def check_steps(loaded: tuple, total_steps: int, global_batch: int) -> None:
    """Every phase starts before the run's last step and holds one global batch at least."""
    for number, (phase, source) in enumerate(loaded, 1):
        if phase.start_step >= total_steps:
            raise PlanError(
                f"--phases: phase {number} starts at step {phase.start_step}, at or after the "
                f"run's last step ({total_steps}); it would train nothing"
            )
        if source is not None and source.num_examples < global_batch:
            raise PlanError(
                f"--phases: phase {number} ({phase.train_data}) holds {source.num_examples} "
                f"examples, fewer than one global batch of {global_batch}"
            )


@dataclasses.dataclass(frozen=True)
class Phase:
    """A phase as the run trains it: from `start_step`, batches of `source`'s stream, which
    began at `data_start_step`, masked at `rate`."""

    number: int
    start_step: int
    source: splits.SplitSource
    data_start_step: int
    rate: float

    def record(self) -> dict:
        """Its entry in run_config.json's `data_phases`."""
        return {
            "phase": self.number,
            "start_step": self.start_step,
            "train_data": self.source.split_dir,
            "train_data_digest": self.source.digest,
            "data_start_step": self.data_start_step,
            "mlm_probability": self.rate,
        }


def build(first: Phase, loaded: tuple) -> tuple[Phase, ...]:
    """Phase 0 (`first`: the run's own data and rate) and the flag's, each filled in from the
    one before it; a phase must start after the step phase 0's data began (after a
    --extend_context restart, the extension's step)."""
    out = [first]
    for number, (flag, source) in enumerate(loaded, 1):
        before = out[-1]
        if flag.start_step <= first.data_start_step:
            raise PlanError(
                f"--phases: phase {number} starts at step {flag.start_step}, but the run's "
                f"--train_data began at step {first.data_start_step} (--extend_context); "
                "phases start after it"
            )
        out.append(
            Phase(
                number,
                flag.start_step,
                source or before.source,
                flag.start_step if source else before.data_start_step,
                flag.mlm_probability or before.rate,
            )
        )
    return tuple(out)


def at(phases: tuple[Phase, ...], step: int) -> Phase:
    """The phase that trains the (0-based) step `step`."""
    return [p for p in phases if p.start_step <= step][-1]


def starts(phases) -> tuple[int, ...]:
    """The steps where a phase after phase 0 begins (`PhaseFlag`s or `Phase`s)."""
    return tuple(p.start_step for p in phases if getattr(p, "number", 1) > 0)


def _trained(records, start_step: int) -> list[dict]:
    """The identity of each phase after phase 0 that has trained steps before `start_step`."""
    return [
        {key: r.get(key) for key in IDENTITY}
        for r in records or ()
        if r.get("phase", 0) > 0 and r["start_step"] < start_step
    ]


def check_restart(saved: list | None, now: list, start_step: int, where: str) -> None:
    """Refuses a restart that changes, adds or drops a phase that has trained steps (a start
    before the resume step); phases from the resume step on may change. `saved`, `now`:
    `data_phases` records (None: a run that recorded none, phase 0 only)."""
    before, after = _trained(saved, start_step), _trained(now, start_step)
    if before == after:
        return

    def listed(records):
        return "; ".join(
            f"from step {p['start_step']}, data {p['train_data_digest'][:8]}..., masking rate "
            f"{p['mlm_probability']}"
            for p in records
        )

    raise PlanError(
        f"--phases: {where} has trained {start_step} steps with the phases "
        f"[{listed(before)}], not [{listed(after)}]; a phase that has trained keeps its start, "
        f"data and masking rate: give those phases as before, and change or add only phases "
        f"from step {start_step} on"
    )


def with_reached(records: list, saved: list | None, start_step: int) -> list:
    """`records` with the time each trained phase was reached carried over from `saved`."""
    reached = {
        tuple(r.get(k) for k in IDENTITY): r.get("reached")
        for r in saved or ()
        if r["start_step"] < start_step
    }
    return [
        {**r, "reached": reached.get(tuple(r.get(k) for k in IDENTITY))} if r["phase"] else r
        for r in records
    ]


def mark_reached(records: list, number: int) -> None:
    """Records (in place) when phase `number` began training."""
    records[number]["reached"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def said(phase: Phase) -> str:
    """The line a run prints when it enters `phase`."""
    return (
        f"phase {phase.number} from step {phase.start_step}: training data "
        f"{phase.source.split_dir} (its stream from step {phase.data_start_step}), masking "
        f"rate {phase.rate}"
    )
