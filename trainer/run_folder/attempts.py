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
    >>> [(a["start_step"], a["end_step"]) for a in spans(history_, step=600)]
    [(0, 400), (400, 600)]
"""

from __future__ import annotations

import time

# What an attempt records: the run_config.json keys a restart may change.
RECIPE = (
    "learning_rate",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "clip_norm",
    "update_clipping",
    "per_replica_batch_size",
    "replicas",
    "grad_accum_steps",
    "global_batch_size",
    "strategy",
    "precision",
    "backend",
    "jit_compile",
    "total_steps",
    "warmup_steps",
    "schedule",
    "decay_start_step",
    "decay_num_steps",
    # A --extend_context restart: the longer data's length, where its stream began, and what
    # changed (trainer/pretraining/context_extension.py).
    "max_length",
    "data_start_step",
    "context_extension",
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


def spans(attempts: list[dict], step: int | None) -> list[dict]:
    """The attempts that trained the weights of optimizer step `step` (all when None), each
    with its `end_step`: it trained the steps after `start_step` up to `end_step`."""
    kept = [a for a in attempts if step is None or a.get("start_step", 0) < step]
    out = []
    for i, attempt in enumerate(kept):
        end = kept[i + 1]["start_step"] if i + 1 < len(kept) else step
        out.append({**attempt, "end_step": end})
    return out
