"""`--extend_context`: a restart that goes on training a run at a longer sequence length, as
ModernBERT's second phase does (Warner et al. 2024, "Context Length Extension": 1,024 tokens,
then 8,192 with the global layers' rotary theta raised from 10,000 to 160,000).

A trained run's settings are fixed across restarts (`trainer.pretraining.plan.FIXED`). Of
those, this flag lets a restart change exactly these: the data (prepared again at the longer
`--max_length`), the sequence length the backbone records, and the backbone arguments the
family lists in `Family.context_extension_args` (ModernBERT: `global_rope_theta`, given in
`--config`). What any restart may change (`RESTART_MAY_CHANGE`: the learning rate and the other
optimizer flags, the schedule, the total) it may change too: ModernBERT's extension trains at
its own rate. Only a family without a position table can do it (a learned table of N rows
reads no position N). The new data's stream starts at its beginning at the step the
extension starts from (`data_start_step`, kept in run_config.json so that a resume inside
the extension reads on from where it was); the step count, the schedule and the masking
keys run on.

Each function takes the saved run and this attempt as `RunRecord`s
(trainer/run_folder/run_record.py).

Example:
    >>> view = allowed(saved, now, "runs/r1")   # the saved run config check_continuation compares
    >>> changes(saved, now)
    {'max_length': [64, 128], 'backbone_config.global_rope_theta': [10000.0, 160000.0]}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.pretraining.plan import PlanError

if TYPE_CHECKING:
    from trainer.run_folder.run_record import RunRecord
# Flags outside plan.FIXED, which every restart may change (docs/training.md "May change between
# restarts"); an extension is a restart, so --help and docs/modernbert.md name them as allowed.
RESTART_MAY_CHANGE = (
    "--learning_rate and the other optimizer flags, --schedule, --update_clipping, --train_steps"
)


def _data(record: RunRecord) -> dict:
    """The settings an extension may change besides the backbone's arguments, by their
    run_config.json names (as `changes` records them and `check_continuation` compares)."""
    return {"max_length": record.max_length, "train_data_digest": record.train_data_digest}


def changes(saved: RunRecord | None, now: RunRecord) -> dict:
    """{setting: [before, after]} of what this restart changes that an extension may."""
    if not saved:
        return {}
    before, after = _data(saved), _data(now)
    out = {k: [before[k], after[k]] for k in before if before[k] != after[k]}
    old, new = saved.backbone_config, now.backbone_config
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            out[f"backbone_config.{key}"] = [old.get(key), new.get(key)]
    return out


def allowed(saved: RunRecord | None, now: RunRecord, where: str) -> dict | None:
    """The saved run config as `check_continuation` should see it under --extend_context:
    the settings an extension may change taken from `now`, every other one as saved (so any
    other change is still refused, naming its flag). Raises PlanError (one line) for what an
    extension cannot change."""
    if not saved:
        return None
    family = now.family
    if family.positions != "rotary" or not family.context_extension_args:
        raise PlanError(
            f"--extend_context: the {family.name} family reads positions from a table of "
            f"{saved.max_length} rows; only a family with rotary positions can be "
            "extended (train a new run at the longer --max_length instead)"
        )
    if (now.max_length or 0) < (saved.max_length or 0):
        raise PlanError(
            f"--extend_context: the data's sequences have {now.max_length} tokens, "
            f"fewer than the {saved.max_length} {where} trained at; an extension "
            "goes to a longer --max_length"
        )
    backbone = dict(saved.backbone_config)
    for key in ("max_sequence_length", *family.context_extension_args):
        if key in now.backbone_config:
            backbone[key] = now.backbone_config[key]
    return {**saved.raw, **_data(now), "backbone_config": backbone}


def data_start_step(saved: RunRecord | None, now: RunRecord, start_step: int) -> int:
    """The step at which the current data's stream began: this restart's step when it
    changes the data, else what the saved run recorded (0 for a run never extended)."""
    if saved and _data(saved) != _data(now):
        return start_step
    return int(saved.recipe.data_start_step or 0) if saved else 0
