"""The pretraining flags whose default a family's recipe may replace, their trainer defaults
and the check of a recipe; trainer/pretraining/pretrain_recipe.py chooses each run's value.
Here, below the families, so that a family record refuses a recipe typo when it is made."""

from __future__ import annotations

from collections.abc import Mapping

# Learning-rate schedules after the warmup (trainer/training/optimizer.py,
# trainer/training/schedules.py).
SCHEDULES = ("linear", "wsd")

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
CHOICES = {"schedule": SCHEDULES, "update_clipping": ("on", "off")}


def check(family: str, recipe: Mapping) -> None:
    """A family's recipe names only flags of this module (a typo would be ignored)."""
    unknown = sorted(set(recipe) - set(FLAGS))
    if unknown:
        raise ValueError(
            f"family {family!r}: pretraining_recipe names {unknown}, not among the flags a "
            f"recipe may set ({', '.join(FLAGS)})"
        )
    for name, choices in CHOICES.items():
        if name in recipe and recipe[name] not in choices:
            raise ValueError(
                f"family {family!r}: pretraining_recipe {name} {recipe[name]!r} is not one of "
                f"{choices}"
            )
