"""results.json and the printed table of a fine-tuning run.

results.json is written once, at the end, whole or not at all (`common.fs.write_json`: a
temporary file, then a rename), and an earlier run's file is deleted when this one starts
training, so a killed run leaves no half file, nor an old one, that a reader trusts.
It states the protocol (recipe and its source, seeds, selection, what the spread is), the
model and its pretraining facts, the data counts (skipped, truncated), every seed's record
and the summary. TensorBoard scalars (dev scores and training loss per epoch, one folder per
seed under `logs/`) are written as the run goes (trainer/training/summaries.py).

Example:
    >>> write(output_dir, document)
    >>> print(table(document))
"""

from __future__ import annotations

import math

from common import fs
from trainer.tasks import unscored
from trainer.training import summaries

RESULTS = "results.json"
LOGS = "logs"
RECIPE_SOURCE = (
    "cramming (Geiping & Goldstein 2023, config/eval/GLUE_sane.yaml): one recipe for every "
    "task, AdamW, lr 4e-5, batch 16, 5 epochs, max length 128, 10 % linear warmup then "
    "linear decay; best epoch on dev as fairseq's RoBERTa GLUE recipe selects"
)
PROTOCOL_NOTES = (
    "each seed fine-tunes from the same pretrained weights with its own head, dropout and "
    "data order; dev is scored after every epoch and the epoch with the best dev score on "
    "the selection metric is kept (ties: the earlier); test is scored once, with that "
    "epoch's weights; the summary gives mean, sample std (n-1), median, min and max over "
    "seeds: the mean is what peers average, the median resists one collapsed seed; a seed "
    "whose best epoch gives every dev example one answer, or scores no better than the best "
    "constant answer (constant_answer_dev), is flagged collapsed, counted in the mean and "
    "left out of dev_excluding_collapsed"
)


def remove_stale(output_dir: str) -> None:
    """Deletes an earlier run's results.json: until this run writes its own, none is there."""
    fs.delete([fs.join(output_dir, RESULTS)])  # a missing file is no error


def protocol_facts(job, max_length: int) -> dict:
    """What every kind's results.json opens its `protocol` with: every flag as parsed, the
    recipe the job ran (`jobs.Job`), the length, the backend and how an epoch is selected."""
    import keras

    return {
        **job.settings.flags,
        "seeds": list(job.seeds),
        "epochs": job.recipe.epochs,
        "batch_size": job.recipe.batch_size,
        "learning_rate": job.recipe.learning_rate,
        "metric": job.recipe.metric,
        "max_length": max_length,
        "backend": keras.backend.backend(),
        "recipe_source": job.recipe_source,
        "recipe_by_size": job.settings.recipe_by_size,
        "selection": "best epoch on dev by the metric",
    }


def model_facts(source, backbone, job) -> dict:
    """results.json's `model`: the model fine-tuned (`source`), and whether from scratch."""
    return {
        "path": job.settings.model,
        "kind": source.kind,
        "checkpoint": source.path,
        "family": source.family.name,
        "from_scratch": job.settings.from_scratch,
        "backbone_parameters": backbone.parameters,
    }


def write(output_dir: str, document: dict) -> str:
    """Writes results.json as strict JSON: a non-finite number (a diverged seed's training
    loss) is null there, and `non_finite` says which and what it was."""
    path = fs.join(output_dir, RESULTS)
    found = {}
    document = _finite(document, "", found)
    if found:
        document["non_finite"] = found
    fs.write_json(path, document)
    return path


def _finite(value, where: str, found: dict):
    """`value` with every non-finite float replaced by None, noting `found[where] = "nan"`
    (JSON has no NaN: Python writes a bare NaN that strict parsers refuse)."""
    if isinstance(value, dict):
        return {k: _finite(v, f"{where}.{k}".lstrip("."), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v, f"{where}[{i}]", found) for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        found[where] = str(value)
        return None
    return value


def number(value) -> str:
    """A score as the table shows it: 4 decimals, "-" for none."""
    return "-" if value is None else f"{value:.4f}"


_cell = number


def table(document: dict) -> str:
    """Per seed: best epoch, dev (and test) scores, collapse; then mean ± std and median."""
    scores = document["scores"]
    scored = [r for r in scores["seeds"] if r["dev"] is not None] or [{"dev": {}}]
    names = list(scored[0]["dev"])
    splits = [s for s in ("dev", "test") if s in scored[0]]
    shown = {"dev": "dev", "test": document["task"].get("test_label", "test")}
    header = ["seed", "epoch", *[f"{shown[s]} {n}" for s in splits for n in names], "note"]
    rows = [header]
    for record in scores["seeds"]:
        rows.append(
            [
                str(record["seed"]),
                str(record["best_epoch"] or "-"),
                *[_cell((record.get(s) or {}).get(n)) for s in splits for n in names],
                _note(record),
            ]
        )
    summary = scores["summary"]

    def over_seeds(split: str, name: str, shown) -> str:
        found = (summary.get(split) or {}).get(name)
        return "-" if found is None else shown(found)

    rows.append(
        [
            "mean",
            "",
            *[
                over_seeds(s, n, lambda f: f"{f['mean']:.4f}±{f['std']:.4f}")
                for s in splits
                for n in names
            ],
            "",
        ]
    )
    rows.append(
        [
            "median",
            "",
            *[over_seeds(s, n, lambda f: _cell(f["median"])) for s in splits for n in names],
            "",
        ]
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    ]
    return "\n".join([*_heading(document), *lines, *_footer(document)])


def _note(record: dict) -> str:
    if record.get("diverged"):
        return f"DIVERGED ({record['diverged']}; not in the means)"
    return "COLLAPSED (constant-answer level)" if record["collapsed"] else ""


def _heading(document: dict) -> list[str]:
    model, pre = document["model"], document["pretraining"]
    start = "random weights (--from_scratch)" if model["from_scratch"] else "pretrained"
    accuracy = pre["masked_accuracy"]
    masked = "unknown" if accuracy is None else f"{100 * accuracy:.1f} %"
    base = pre["unigram_baseline"]
    if base is not None:
        masked += f" (unigram baseline {100 * base:.1f} %)"
    return [
        f"model: {model['path']} ({model['family']}, {start}); pretraining masked "
        f"accuracy: {masked}",
        f"selection metric: {document['protocol']['metric']} on dev, "
        f"{len(document['scores']['seeds'])} seed(s)",
    ]


def _footer(document: dict) -> list[str]:
    lines = []
    summary = document["scores"]["summary"]
    diverged = [d["seed"] for d in summary.get("diverged_seeds", ())]
    collapsed = [s for s in summary["collapsed_seeds"] if s not in diverged]
    if collapsed:
        lines.append(
            f"collapsed seeds: {', '.join(map(str, collapsed))} (no better than the "
            "constant answer; counted in the mean)"
        )
    if diverged:
        lines.append(
            f"diverged seeds: {', '.join(map(str, diverged))} (non-finite loss or "
            "predictions: no scores, left out of the means and the model card)"
        )
    if document.get("interrupted"):
        lines.append(f"interrupted: {document['interrupted']}")
    if document["pretraining"]["warning"]:
        lines.append("warning: " + document["pretraining"]["warning"])
    data = document["data"]
    if data.get("test", {}).get("unlabelled"):
        lines.append(unscored.note(data["test"]))
    for split, counts in data.items():
        malformed = counts.get("skipped_malformed", 0)
        if counts["skipped_empty"] or counts["truncated"] or malformed:
            lines.append(
                f"{split}: {counts['skipped_empty']} row(s) with an empty text "
                f"skipped, {malformed} row(s) lacking a field skipped, "
                f"{counts['truncated']} example(s) truncated to "
                f"{counts['max_length']} tokens"
            )
    return lines


class Scalars:
    """TensorBoard scalars per seed (trainer/training/summaries.py)."""

    def __init__(self, output_dir: str):
        self.output_dir = output_dir
        self._writers = {}

    def __call__(self, seed: int, entry: dict) -> None:
        if seed not in self._writers:
            folder = fs.join(self.output_dir, LOGS, f"seed-{seed}")
            self._writers[seed] = summaries.EventLog(folder)
        self._writers[seed].write(
            entry["epoch"],
            {
                "train_loss": entry["train_loss"],
                **{f"dev_{name}": value for name, value in entry["dev"].items()},
            },
        )


def glue_table(document: dict) -> str:
    """Per GLUE task: its reported metrics (mean over seeds, x100 as peers print them),
    the task score, collapsed seeds; then the GLUE score and how it is computed."""
    score = document["glue"]
    rows = [["task", "seeds", "metrics (dev, mean over seeds)", "task score", "note"]]
    for name, task in document["tasks"].items():
        if task["reported"] is None:
            rows.append([name, str(len(task["seeds"])), "every seed diverged", "-", ""])
            continue
        shown = ", ".join(f"{m} {100 * v:.1f}" for m, v in task["reported"].items())
        note = (
            f"collapsed seeds: {', '.join(map(str, task['collapsed_seeds']))}"
            if task["collapsed_seeds"]
            else ""
        )
        rows.append(
            [name, str(len(task["seeds"])), shown, f"{100 * score['tasks'][name]:.1f}", note]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    partial = "" if score["complete"] else " (not all 8 tasks: not comparable to GLUE scores)"
    return "\n".join(
        [*lines, f"GLUE score: {100 * score['score']:.1f}{partial}", f"score: {score['source']}"]
    )
