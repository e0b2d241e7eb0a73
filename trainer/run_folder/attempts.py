"""Each attempt of a run (a start or a restart) and the recipe it trained with.

A restart may change the learning rate and the other optimizer flags, the split of the
global batch (replicas x per-replica batch x accumulation), the precision, the hardware and
the planned total (docs/training.md). run_config.json keeps the flags of the latest attempt
(what a restart must match) and, under `attempts`, one record per attempt whose steps the
weights kept: the step it resumed from and its recipe. An attempt is dropped when a later
one resumes at or before its start (everything it trained was redone), so the attempts
partition the steps of the newest weights, and a model card can say what held when.

Example:
    >>> history(saved, run_config, start_step=400)    # saved: the previous run_config.json
    [{'start_step': 0, 'learning_rate': 0.001, ...}, {'start_step': 400, ...}]
    >>> [(a.start_step, a.end_step) for a in spans(history_, step=600)]
    [(0, 400), (400, 600)]
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True)
class AttemptRecipe:
    """What one attempt trained with: the run_config.json keys a restart may change (None
    where a run config older than the key does not record it), and the steps it trained."""

    learning_rate: float | None = None
    weight_decay: float | None = None
    adam_beta1: float | None = None
    adam_beta2: float | None = None
    adam_epsilon: float | None = None
    clip_norm: float | None = None
    update_clipping: str | None = None
    per_replica_batch_size: int | None = None
    replicas: int | None = None
    grad_accum_steps: int | None = None
    global_batch_size: int | None = None
    strategy: str | None = None
    precision: str | None = None
    backend: str | None = None
    jit_compile: bool | None = None
    total_steps: int | None = None
    warmup_steps: int | None = None
    schedule: str | None = None
    decay_start_step: int | None = None
    decay_num_steps: int | None = None
    # A --extend_context restart: the longer data's length, where its stream began, and what
    # changed (trainer/pretraining/context_extension.py).
    max_length: int | None = None
    data_start_step: int | None = None
    context_extension: dict | None = None
    # Not part of the recipe: the step an attempt resumed from and (`spans`) the last it
    # trained, where the weights' step ends it; None in a run config's own recipe.
    start_step: int | None = None
    end_step: int | None = None

    @classmethod
    def of(cls, recorded: Mapping) -> AttemptRecipe:
        """The recipe of a run config (its latest attempt's) or of one of its `attempts`."""
        return cls(**{field.name: recorded.get(field.name) for field in dataclasses.fields(cls)})


# What an attempt records: the run_config.json keys a restart may change.
RECIPE = tuple(
    f.name for f in dataclasses.fields(AttemptRecipe) if f.name not in ("start_step", "end_step")
)


def record(run_config: dict, start_step: int) -> dict:
    return {
        "start_step": start_step,
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        **{key: run_config.get(key) for key in RECIPE},
    }


def history(saved: dict | None, run_config: dict, start_step: int) -> list[dict]:
    """The attempts of `saved` whose steps the restored weights kept, then this one. A run
    config written before attempts were recorded stands for one attempt from step 0."""
    if saved and saved.get("attempts") is None:
        earlier = [{**record(saved, 0), "started": None}]
    else:
        earlier = list((saved or {}).get("attempts") or [])
    return [a for a in earlier if a.get("start_step", 0) < start_step] + [
        record(run_config, start_step)
    ]


def spans(attempts: list[dict], step: int | None) -> list[AttemptRecipe]:
    """The attempts that trained the weights of optimizer step `step` (all when None), each
    with its `end_step`: it trained the steps after `start_step` up to `end_step`."""
    kept = [a for a in attempts if step is None or a.get("start_step", 0) < step]
    out = []
    for i, attempt in enumerate(kept):
        end = kept[i + 1]["start_step"] if i + 1 < len(kept) else step
        out.append(AttemptRecipe.of({**attempt, "end_step": end}))
    return out
