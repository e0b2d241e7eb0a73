"""The pretraining flags whose default a model family may replace, and how a run's value of
each is chosen.

A family record (trainer/families/family.py) may carry a `pretraining_recipe`: defaults for
some of these flags (ModernBERT's 30 % masking, warmup-stable-decay, update clipping...), so
no code outside trainer/families/ names a family to pick them. For each flag, in order:

1. the flag given on the command line;
2. the value the resumed run trained with (run_config.json), as for --learning_rate: a default
   or recipe changed in the code must not change a run half-way (for --mlm_probability the
   restart would be refused);
3. the family's recipe;
4. the trainer's default below.

run_config.json records the values chosen.

Example:
    >>> chosen(config, {"mlm_probability": 0.3}, saved=None)["mlm_probability"]
    0.3
    >>> apply(config, family.pretraining_recipe, saved).masking.mlm_probability  # a RunRecord
    0.15
"""

from __future__ import annotations

from collections.abc import Mapping

from trainer.families.recipe_flags import DEFAULTS
from trainer.pretraining.plan import PlanError


def chosen(config, recipe: Mapping, saved) -> dict:
    """{flag: value} for every recipe flag of `config` (None where not given); `saved` is the
    `RunRecord` of a run that has trained, or None."""
    out, flags = {}, config.to_dict()
    for name, default in DEFAULTS.items():
        given = flags[name]
        if given is not None:
            out[name] = given
        elif saved and saved.flag(name) is not None:
            out[name] = saved.flag(name)
        else:
            out[name] = recipe.get(name, default)
    return out


def apply(config, recipe: Mapping, saved):
    """A copy of `config` with every recipe flag chosen (`chosen`); the copy checks the
    values' bounds as the flags' are. --decay_from_step needs the wsd schedule."""
    config = config.with_flags(**chosen(config, recipe, saved))
    schedule = config.schedule
    if schedule.decay_from_step is not None and schedule.schedule != "wsd":
        raise PlanError(
            f"--decay_from_step/--decay_steps decay a warmup-stable-decay run: this run's "
            f"--schedule is {schedule.schedule} (pass --schedule wsd)"
        )
    return config
