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

Example:
    >>> view = allowed(saved, run_config, family)   # what check_continuation compares
    >>> changes(saved, run_config)
    {'max_length': [64, 128], 'backbone_config.global_rope_theta': [10000.0, 160000.0]}
"""

from __future__ import annotations

from trainer.pretraining.plan import PlanError

# run_config.json keys an extension may change besides the backbone's arguments.
_DATA = ("max_length", "train_data_digest")
# Flags outside plan.FIXED, which every restart may change (docs/training.md "May change between
# restarts"); an extension is a restart, so --help and docs/modernbert.md name them as allowed.
RESTART_MAY_CHANGE = (
    "--learning_rate and the other optimizer flags, --schedule, --update_clipping, --train_steps"
)


def changes(saved: dict | None, now: dict) -> dict:
    """{setting: [before, after]} of what this restart changes that an extension may."""
    if not saved:
        return {}
    out = {k: [saved.get(k), now.get(k)] for k in _DATA if saved.get(k) != now.get(k)}
    old, new = saved.get("backbone_config", {}), now.get("backbone_config", {})
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            out[f"backbone_config.{key}"] = [old.get(key), new.get(key)]
    return out


def allowed(saved: dict | None, now: dict, family, where: str) -> dict | None:
    """The saved run as `check_continuation` should see it under --extend_context: the
    settings an extension may change taken from `now`, every other one as saved (so any other
    change is still refused, naming its flag). Raises PlanError (one line) for what an
    extension cannot change."""
    if not saved:
        return saved
    backbone_keys = ("max_sequence_length", *family.context_extension_args)
    if family.positions != "rotary" or not family.context_extension_args:
        raise PlanError(
            f"--extend_context: the {family.name} family reads positions from a table of "
            f"{saved.get('max_length')} rows; only a family with rotary positions can be "
            "extended (train a new run at the longer --max_length instead)"
        )
    if (now.get("max_length") or 0) < (saved.get("max_length") or 0):
        raise PlanError(
            f"--extend_context: the data's sequences have {now.get('max_length')} tokens, "
            f"fewer than the {saved.get('max_length')} {where} trained at; an extension "
            "goes to a longer --max_length"
        )
    view = {**saved, **{k: now.get(k) for k in _DATA}}
    backbone = dict(saved.get("backbone_config", {}))
    backbone.update(
        {k: now["backbone_config"][k] for k in backbone_keys if k in now["backbone_config"]}
    )
    view["backbone_config"] = backbone
    return view


def data_start_step(saved: dict | None, now: dict, start_step: int) -> int:
    """The step at which the current data's stream began: this restart's step when it
    changes the data, else what the saved run recorded (0 for a run never extended)."""
    if saved and any(saved.get(k) != now.get(k) for k in _DATA):
        return start_step
    return int((saved or {}).get("data_start_step", 0))
