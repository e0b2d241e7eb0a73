"""Fine-tuning scores into an export's model cards (`model-index`), so a pushed model shows them.

`--card EXPORT` names `trainer.export`'s output folder (its `keras-hub/` and `hf/` folders
each hold a README.md) or one format's folder. Each card is parsed with huggingface_hub's
`ModelCard`, its `eval_results` get one entry per task and metric (the dev mean over seeds;
for `--task glue` also the GLUE score), an earlier entry of the same task, dataset, split
and metric is replaced (a rerun does not pile up), the others (the masked-LM results of
`trainer.model_card`) stay, and the README is rewritten whole (`common.fs.write_bytes`: a
temporary file, then a rename), never torn.

Example:
    >>> paths = readmes("exports/tiny")      # [exports/tiny/keras-hub/README.md, .../hf/...]
    >>> add(paths, entries(document))
"""

from __future__ import annotations

import posixpath

from common import fs
from common.errors import UserError
from trainer import model_card
from trainer.finetuning import auto_rate, glue

FORMAT_FOLDERS = ("keras-hub", "hf")
# The Hub's metric ids (evaluate's names), so the Hub's leaderboards read them.
METRIC_TYPES = {
    "accuracy": "accuracy",
    "f1": "f1",
    "macro_f1": "f1",
    "mcc": "matthews_correlation",
    "pearson": "pearsonr",
    "spearman": "spearmanr",
    "mse": "mse",
}
TASK_TYPE = "text-classification"
_TASK_NAMES = {"classification": "Text classification", "regression": "Text regression"}


def readmes(export_dir: str) -> list[str]:
    """The model cards of an export: each format folder's README.md, or the folder's own."""
    found = [fs.join(export_dir, f, model_card.README) for f in FORMAT_FOLDERS]
    found = [p for p in found if fs.exists(p)]
    own = fs.join(export_dir, model_card.README)
    if not found and fs.exists(own):
        found = [own]
    if not found:
        raise UserError(
            f"--card {export_dir}: no model card there (README.md in it or in "
            f"its {' or '.join(FORMAT_FOLDERS)}/ folders); give trainer.export's "
            "output folder"
        )
    return found


def _result(metric: str, value: float, name: str, labels=None, **dataset):
    """One EvalResult; `labels` (class names in id order) go into metric_args, so the card
    says what the classes were and which one binary F1 is of."""
    from huggingface_hub import EvalResult

    args = None
    if labels:
        args = {"labels": list(labels)}
        if metric == "f1" and len(labels) == 2:
            args["pos_label"] = labels[1]
    return EvalResult(
        task_type=TASK_TYPE,
        metric_type=METRIC_TYPES.get(metric, metric),
        metric_name=name,
        metric_value=round(float(value), 4),
        metric_config="macro" if metric == "macro_f1" else None,
        metric_args=args,
        **dataset,
    )


def _hub_dataset(source: dict, split: str) -> dict:
    """The card's dataset fields of a dataset loaded by name (results.json's `dataset`)."""
    config = f" ({source['config']})" if source.get("config") else ""
    return dict(
        dataset_type=source["id"],
        dataset_name=source["id"] + config,
        dataset_config=source.get("config"),
        dataset_split=source["splits"].get(split, split),
        dataset_revision=source.get("revision"),
    )


def _glue_entries(document: dict) -> list:
    found = []
    for task_name, task in document["tasks"].items():
        folder = glue.TASKS[task_name].folder
        seeds = len(task["seeds"])
        revision = (task.get("dataset") or {}).get("revision")
        for metric, value in task["reported"].items():
            mismatched = metric.endswith(glue.MISMATCHED)
            split = (
                ("validation_mismatched" if mismatched else "validation_matched")
                if task_name == "mnli"
                else "validation"
            )
            found.append(
                _result(
                    metric.removesuffix(glue.MISMATCHED),
                    value,
                    f"{metric} (dev, mean of {seeds} seed(s))",
                    task_name=f"GLUE {folder}",
                    dataset_type="nyu-mll/glue",
                    dataset_name=f"GLUE {folder}",
                    dataset_config=task_name,
                    dataset_split=split,
                    dataset_revision=revision,
                )
            )
    score = document["glue"]
    if score["complete"]:  # a partial mean is not a GLUE score
        found.append(
            _result(
                "glue_score",
                score["score"],
                "GLUE score (dev, 8 tasks, no WNLI)",
                task_name="GLUE",
                dataset_type="nyu-mll/glue",
                dataset_name="GLUE",
                dataset_split="validation",
            )
        )
    return found


def entries(document: dict) -> list:
    """The EvalResults of a results document (one task's, or --task glue's summary)."""
    if "glue" in document:
        return _glue_entries(document)
    task, summary = document["task"], document["scores"]["summary"]["dev"]
    seeds = len(document["scores"]["seeds"])
    source, labels = document.get("dataset"), None
    if task.get("glue"):
        folder = glue.TASKS[task["glue"]].folder
        dataset = dict(
            task_name=f"GLUE {folder}",
            dataset_type="nyu-mll/glue",
            dataset_name=f"GLUE {folder}",
            dataset_config=task["glue"],
            dataset_split="validation",
            dataset_revision=(source or {}).get("revision"),
        )
        names = task["reported"]
    elif source:
        dataset = dict(task_name=_TASK_NAMES[task["type"]], **_hub_dataset(source, "dev"))
        names, labels = list(summary), task.get("labels")
    else:
        dev = document["data"]["dev"]["path"]
        dataset = dict(
            task_name=_TASK_NAMES[task["type"]],
            dataset_type="custom",
            dataset_name=fs.basename(dev.rstrip("/")),
            dataset_split="dev",
        )
        names, labels = list(summary), task.get("labels")
    found = [
        _result(m, summary[m]["mean"], f"{m} (dev, mean of {seeds} seed(s))", labels, **dataset)
        for m in names
    ]
    sweep = auto_rate.card_args(document)  # --learning_rate auto: how the rate was chosen
    for result in found if sweep else ():
        result.metric_args = {**(result.metric_args or {}), **sweep}
    return found


def _key(result) -> tuple:
    return (
        result.task_type,
        result.dataset_type,
        result.dataset_name,
        result.dataset_config,
        result.dataset_split,
        result.metric_type,
        result.metric_config,
    )


def add(paths: list[str], results: list) -> list[str]:
    """Adds `results` to each card (replacing entries with the same key); returns the paths."""
    from huggingface_hub import ModelCard

    new_keys = {_key(r) for r in results}
    for path in paths:
        try:
            card = ModelCard(fs.read_bytes(path).decode("utf-8"))
        except ValueError as err:
            raise UserError(f"{path} is not a model card with metadata: {err}") from None
        kept = [r for r in card.data.eval_results or () if _key(r) not in new_keys]
        card.data.eval_results = kept + list(results)
        if not card.data.model_name:
            card.data.model_name = fs.basename(posixpath.dirname(path)) or "model"
        fs.write_bytes(path, str(card).encode("utf-8"))
    return paths
