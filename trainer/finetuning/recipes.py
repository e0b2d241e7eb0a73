"""The fine-tuning recipe a model gets when the flags do not say: by its size, as pretraining
picks its peak rate by size (`trainer.pretraining.plan.DEFAULT_LEARNING_RATES`).

GLUE's recipes (cramming's one recipe for a task of your own files, MosaicBERT's per GLUE
task) were set for base-sized models. The tiny and small models one machine pretrains need
far larger rates: on the man-page task of docs/finetuning.md ("Recipe by size") the tiny
model at cramming's 4e-5 stayed near the majority class, and pretrained scored no better
than random weights, while the rate of `SIZE_RECIPES` scored above a TF-IDF baseline. So
tiny and small get their own rate and epochs; base and large keep GLUE's recipes. A flag the
user gives always wins (`FinetuneFlags.recipe`, which makes the one `Recipe` a job runs with).

The size is the name the pretraining run recorded (`RunRecord.size`: what `--model tiny`
wrote), kept when the backbone's width is that size's; otherwise (a run continued from a
model with --init_from, an export from elsewhere, `--config` that changed the width) the
largest named size whose `hidden_dim` the backbone reaches.

Example:
    >>> model_size(source.record)   # a tiny run's: run_config.json {"size": "tiny", ...}
    ('tiny', "run_config.json's model")
    >>> own_defaults("tiny").learning_rate
    0.003
    >>> rate("auto", 0.003)
    Auto(centre=0.003)
"""

from __future__ import annotations

import dataclasses

from trainer.families import sizes
from trainer.tasks import glue

# cramming's one recipe (results.RECIPE_SOURCE), for a task of the user's own files.
CRAMMING_DEFAULTS = glue.TaskDefaults(learning_rate=4e-5, epochs=5, batch_size=16, seeds=(1, 2, 3))

# Rate and epochs by size where GLUE's base-sized recipe does not fit (docs/finetuning.md
# "Recipe by size"). tiny: the rate the best of 3e-4, 1e-3 and 3e-3 on dev, pretrained, 3
# seeds (at 4e-5 it stayed near the majority class); 20 epochs, not 10: the model pretrained
# in the task's domain gained 1.4 test points from them (3 seeds, best epochs 18-20) where
# random weights lost 1.6. small: a tenth of tiny's rate, measured with a small model
# pretrained in the task's domain: 52.5 % test at 1e-3 (3 seeds), below random weights'
# 53.6, and 57.8 % at 3e-4 (5 seeds), above TF-IDF and +5.6 over random weights; tiny at
# 1e-3 lost 2.3 points to 3e-3 (1 seed).
SIZE_RECIPES = {"tiny": (3e-3, 20), "small": (3e-4, 20)}

# The head's input by size: the mean of the tokens where it measured better on the man-page
# task (tiny: +2.0 test points over the first token at 3e-3; small: +3.3 at 3e-4, 3 seeds
# each); the first token, as keras-hub's classifiers and the GLUE recipes above were
# published, for base and large.
SIZE_POOLING = {"tiny": "mean", "small": "mean"}

SIZE_SOURCE = (
    "by model size (trainer/finetuning/recipes.py, docs/finetuning.md 'Recipe by size'): "
    "cramming's recipe (AdamW, batch 16, max length 128, 10 % linear warmup then linear "
    "decay) with the size's learning rate and epochs; best epoch on dev"
)

# `--learning_rate auto`: these multiples of the size's rate, one seed each, on dev.
AUTO_FACTORS = (0.1, 0.3, 1.0, 3.0)


def model_size(record) -> tuple[str, str]:
    """(named size, how it was found) of a model's `RunRecord` (`ModelSource.record`)."""
    hidden = int(record.backbone_config.get("hidden_dim", 0))
    named = record.size
    if named in sizes.SIZES and sizes.SIZES[named]["hidden_dim"] == hidden:
        return named, "run_config.json's model"
    fits = [n for n in sizes.NAMES if sizes.SIZES[n]["hidden_dim"] <= hidden] or [sizes.NAMES[0]]
    return fits[-1], f"hidden_dim {hidden}"


def by_size(field: str) -> str:
    """--help's line of the sizes' own `learning_rate`, `epochs` or `pooling`:
    `tiny 0.003, small 0.0003`."""
    if field == "pooling":
        values = SIZE_POOLING
    else:
        column = ("learning_rate", "epochs").index(field)
        values = {name: f"{recipe[column]:g}" for name, recipe in SIZE_RECIPES.items()}
    return ", ".join(f"{name} {value}" for name, value in values.items())


def own_defaults(size: str) -> glue.TaskDefaults:
    """The defaults of a task of the user's own files at `size`."""
    if size not in SIZE_RECIPES:
        return CRAMMING_DEFAULTS
    rate, epochs = SIZE_RECIPES[size]
    return dataclasses.replace(CRAMMING_DEFAULTS, learning_rate=rate, epochs=epochs)


def glue_defaults(task_defaults: glue.TaskDefaults, size: str) -> glue.TaskDefaults:
    """A GLUE task's own defaults, its rate the size's where GLUE's does not fit (its epochs,
    batch and seeds stay: MNLI's 393k examples need no 10 epochs)."""
    if size not in SIZE_RECIPES:
        return task_defaults
    return dataclasses.replace(task_defaults, learning_rate=SIZE_RECIPES[size][0])


def pooling(given: str | None, size: str) -> str:
    """--pooling where given, else the size's."""
    return given or SIZE_POOLING.get(size, "cls")


def source_note(size: str, how: str) -> str:
    """results.json `protocol.recipe_by_size`: which rule gave the defaults."""
    if size in SIZE_RECIPES:
        rate, epochs = SIZE_RECIPES[size]
        rule = f"lr {rate:g}, {epochs} epochs, {pooling(None, size)} pooling"
    else:
        rule = "GLUE's base-size recipe, cls pooling"
    return f"size {size} ({how}): {rule}"


def auto_grid(centre: float) -> list[float]:
    """The rates `--learning_rate auto` tries, around the default rate `centre`."""
    return [float(f"{centre * factor:.2g}") for factor in AUTO_FACTORS]


@dataclasses.dataclass(frozen=True)
class Auto:
    """`--learning_rate auto`: the rate is one of `grid()` around `centre` (the default rate),
    chosen on dev (`auto_rate.choose`, which gives the job a new `Recipe` at that rate)."""

    centre: float

    def grid(self) -> list[float]:
        return auto_grid(self.centre)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What one job trains with: the flags where given, else its `glue.TaskDefaults`
    (`FinetuneFlags.recipe`). `learning_rate` is `Auto` until `auto_rate.choose` picks one."""

    epochs: int
    batch_size: int
    learning_rate: float | Auto
    warmup_ratio: float
    weight_decay: float
    metric: str  # selects the epoch


def rate(given: str | None, default: float) -> float | Auto:
    """--learning_rate's rate: the positive number given, `Auto` around `default` for `auto`,
    `default` when not given."""
    if given is None:
        return default
    if given == "auto":
        return Auto(default)
    try:
        number = float(given)
    except (TypeError, ValueError):
        number = None
    if number is None or not number > 0 or number == float("inf"):
        raise ValueError(f"--learning_rate must be a positive number or auto, not {given!r}")
    return number
