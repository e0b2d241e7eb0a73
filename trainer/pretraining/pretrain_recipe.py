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
    >>> apply(config, families.get(config.family).pretraining_recipe, saved).mlm_probability
    0.15
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from trainer.pretraining.plan import SCHEDULES, PlanError

# The trainer's defaults, each with its source.
DEFAULTS = {
    # BERT (Devlin et al. 2019) and RoBERTa (Liu et al. 2019) select 15 % of the tokens.
    "mlm_probability": 0.15,
    # beta2 0.98 and epsilon 1e-6: RoBERTa's values for large batches (Liu et al. 2019 §3.1).
    "adam_beta1": 0.9,
    "adam_beta2": 0.98,
    "adam_epsilon": 1e-6,
    "weight_decay": 1e-3,
    "clip_norm": 1.0,
    "warmup_ratio": 0.05,  # the legacy HF example's
    "schedule": "linear",  # BERT/RoBERTa: linear warmup, linear decay to 0
    # Share of a warmup-stable-decay run in its decay: Hägele et al. 2024 (arXiv 2405.18392)
    # find a 1 - sqrt cooldown over 20 % of the run matches or beats cosine.
    "decay_ratio": 0.2,
    # Off: BERT/RoBERTa results stay what they were (docs/training.md "Update clipping").
    "update_clipping": "off",
}
FLAGS = tuple(DEFAULTS)
_CHOICES = {"schedule": SCHEDULES, "update_clipping": ("on", "off")}


def check(family: str, recipe: Mapping) -> None:
    """A family's recipe names only flags of this module (a typo would be ignored)."""
    unknown = sorted(set(recipe) - set(FLAGS))
    if unknown:
        raise ValueError(
            f"family {family!r}: pretraining_recipe names {unknown}, not among the flags a "
            f"recipe may set ({', '.join(FLAGS)})"
        )
    for name, choices in _CHOICES.items():
        if name in recipe and recipe[name] not in choices:
            raise ValueError(
                f"family {family!r}: pretraining_recipe {name} {recipe[name]!r} is not one of "
                f"{choices}"
            )


def chosen(config, recipe: Mapping, saved: dict | None) -> dict:
    """{flag: value} for every recipe flag of `config` (None where not given); `saved` is the
    run config of a run that has trained, or None."""
    out = {}
    for name, default in DEFAULTS.items():
        given = getattr(config, name)
        if given is not None:
            out[name] = given
        elif saved and saved.get(name) is not None:
            out[name] = saved[name]
        else:
            out[name] = recipe.get(name, default)
    return out


def apply(config, recipe: Mapping, saved: dict | None):
    """A copy of `config` with every recipe flag chosen (`chosen`); the copy checks the
    values' bounds as the flags' are. --decay_from_step needs the wsd schedule."""
    config = dataclasses.replace(config, **chosen(config, recipe, saved))
    if config.decay_from_step is not None and config.schedule != "wsd":
        raise PlanError(
            f"--decay_from_step/--decay_steps decay a warmup-stable-decay run: this run's "
            f"--schedule is {config.schedule} (pass --schedule wsd)"
        )
    return config
