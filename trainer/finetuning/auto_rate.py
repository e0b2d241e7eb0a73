"""`--learning_rate auto`: fine-tune one seed at each rate of a small grid around the size's
default (the job's rate is a `recipes.Auto`: `Auto.grid`), keep the rate with the best dev
score, then run every seed at it. MosaicBERT and ModernBERT choose their rate per task in the
same way (a sweep on dev); one seed per rate keeps the cost to the grid's size in runs,
recorded beside the choice.

The grid's runs see dev only; test is scored by the seeds at the chosen rate alone.

Example:
    >>> recipe, sweep = choose(backbone, data, job, jit_compile=False, runtime=None)
    >>> job = dataclasses.replace(job, recipe=recipe)   # the job at the chosen rate
    >>> sweep["chosen"], [row["dev"] for row in sweep["grid"]]
    (0.001, [0.41, 0.47, 0.52, 0.49])
"""

from __future__ import annotations

import dataclasses
import time

from common.errors import UserError
from trainer.finetuning import protocol


def choose(backbone, data, job, jit_compile: bool, runtime, say=print) -> tuple:
    """(a new recipe: the job's at the chosen rate, the sweep's record for results.json); the
    job's own recipe (its rate `recipes.Auto`) stays as it was."""
    started = time.perf_counter()
    metric, seed, auto = job.recipe.metric, job.seeds[0], job.recipe.learning_rate
    dev_only = dataclasses.replace(data, test=None)  # the grid never sees test
    grid, best = [], None
    for rate in auto.grid():
        recipe = dataclasses.replace(job.recipe, learning_rate=rate)
        models = protocol.SeedModels(backbone, dev_only, recipe, jit_compile, runtime)
        record = protocol.run_seed(models, seed)
        if record.get("diverged"):  # a rate too high for the model: noted, never chosen
            grid.append({"learning_rate": rate, "dev": None, "diverged": record["diverged"]})
            say(f"{job.name} lr {rate:g} (seed {seed}): diverged ({record['diverged']})")
            continue
        row = {
            "learning_rate": rate,
            "dev": record["dev"][metric],
            "best_epoch": record["best_epoch"],
            "seconds": record["seconds"],
        }
        say(f"{job.name} lr {rate:g} (seed {seed}): dev {metric} {row['dev']:.4f}")
        grid.append(row)
        if best is None or protocol.better(row["dev"], best["dev"], metric):
            best = row  # ties: the earlier, smaller rate
    if best is None:
        rates = ", ".join(f"{row['learning_rate']:g}" for row in grid)
        raise UserError(
            f"--learning_rate auto: every rate of the grid ({rates}) diverged on {job.name}; "
            "give --learning_rate lower than these"
        )
    sweep = {
        "grid": grid,
        "centre": auto.centre,
        "seed": seed,
        "metric": metric,
        "chosen": best["learning_rate"],
        "runs": len(grid),
        "seconds": round(time.perf_counter() - started, 2),
    }
    return dataclasses.replace(job.recipe, learning_rate=best["learning_rate"]), sweep


def card_args(document: dict) -> dict:
    """What the model card's entries carry of a `--learning_rate auto` sweep (nothing
    without one): each rate's dev score (or `diverged`), the chosen rate, the seed, the cost."""
    sweep = document.get("learning_rate_sweep")
    if not sweep:
        return {}
    return {
        "learning_rate_sweep": {
            "grid": {f"{r['learning_rate']:g}": _card_score(r) for r in sweep["grid"]},
            "metric": sweep["metric"],
            "seed": sweep["seed"],
            "chosen": sweep["chosen"],
            "runs": sweep["runs"],
            "seconds": sweep["seconds"],
        }
    }


def _card_score(row: dict):
    """A grid row's dev score for the card; a rate that diverged has none, and says so."""
    if row.get("dev") is None:
        return "diverged"
    return round(row["dev"], 4)
