"""Fine-tuning scores into an export's model cards (`model-index`), so a pushed model shows them.

`--card EXPORT` names `trainer.export`'s output folder (its `keras-hub/` and `hf/` folders
each hold a README.md) or one format's folder. Each card is parsed with huggingface_hub's
`ModelCard`, its `eval_results` get one entry per task and metric (the dev mean over seeds;
for `--task glue` also the GLUE score), an earlier entry of the same task, dataset, split
and metric is replaced (a rerun does not pile up), the others (the masked-LM results of
`trainer.release.model_card`) stay, and the README is rewritten whole (`common.fs.write_bytes`: a
temporary file, then a rename), never torn.

Example:
    >>> paths = readmes("exports/tiny")      # [exports/tiny/keras-hub/README.md, .../hf/...]
    >>> add(paths, entries(document))
"""

from __future__ import annotations

import os
import posixpath
import tempfile

from common import fs
from common.errors import UserError
from trainer.finetuning import auto_rate
from trainer.release import model_card
from trainer.tasks import glue, task_kinds

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
    # retrieval as MTEB's cards name them; tagging's entity scores as seqeval's
    "ndcg@10": "ndcg_at_10",
    "mrr@10": "mrr_at_10",
    "recall@100": "recall_at_100",
    "entity_f1": "f1",
    "entity_precision": "precision",
    "entity_recall": "recall",
    "token_accuracy": "accuracy",
}
TASK_TYPE = "text-classification"  # GLUE's; a task of one's own: its kind's `card_type`


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


def _result(
    metric: str, value: float, name: str, labels=None, task_type: str = TASK_TYPE, **dataset
):
    """One EvalResult; `labels` (class names in id order) go into metric_args, so the card
    says what the classes were and which one binary F1 is of."""
    from huggingface_hub import EvalResult

    args = None
    if labels:
        args = {"labels": list(labels)}
        if metric == "f1" and len(labels) == 2:
            args["pos_label"] = labels[1]
    return EvalResult(
        task_type=task_type,
        metric_type=METRIC_TYPES.get(metric, metric),
        metric_name=name,
        metric_value=round(float(value), 4),
        metric_config=_METRIC_CONFIGS.get(metric),
        metric_args=args,
        **dataset,
    )


def writable(paths: list[str]) -> list[str]:
    """`paths`, once each card's folder has taken a probe file (a card is rewritten as a
    temporary file beside it, then renamed): checked before fine-tuning, so a read-only
    export fails now, not after every seed. Mode bits say nothing for root, or on a
    read-only mount: only a write tells."""
    for path in paths:
        if fs.is_remote(path):
            continue  # an object store has no folder permissions to probe
        folder = os.path.dirname(path) or "."
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".card-probe-"):
                pass
            with open(path, "r+b"):
                pass
        except OSError as err:
            raise UserError(
                f"--card: cannot write the model card {path} ({err.strerror}); make the "
                "export writable or leave out --card"
            ) from None
    return paths


def _own_files(document: dict) -> dict:
    """The card's dataset fields of a task of the user's own files. Its identity (the
    dataset config, which huggingface_hub groups model-index results by) is the dev file's
    folder and name, so two tasks keep their own entries and a rerun replaces its own."""
    dev = document["data"]["dev"]["path"].rstrip("/")
    name = posixpath.join(fs.basename(posixpath.dirname(dev)), fs.basename(dev)).lstrip("/")
    return dict(dataset_type="custom", dataset_name=name, dataset_config=name, dataset_split="dev")


def _local_dataset(source: dict, split: str) -> dict:
    """A save_to_disk folder: local data, named by its content (datasets' fingerprint of
    the dev split), never by its path on this machine."""
    fingerprint = (source.get("fingerprints") or {}).get(split) or "unknown"
    name = f"local data {fingerprint}"
    return dict(
        dataset_type="custom",
        dataset_name=name,
        dataset_config=name,
        dataset_split=source["splits"].get(split, split),
    )


def _hub_dataset(source: dict, split: str) -> dict:
    """The card's dataset fields of a dataset loaded by name (results.json's `dataset`)."""
    if source.get("local"):
        return _local_dataset(source, split)
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
        if task["reported"] is None:  # every seed diverged
            continue
        folder = glue.TASKS[task_name].folder
        seeds = len(task.get("seeds_in_mean", task["seeds"]))
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


_METRIC_CONFIGS = {"macro_f1": "macro", "entity_f1": "seqeval micro"}


def entries(document: dict) -> list:
    """The EvalResults of a results document (one task's, or --task glue's summary)."""
    if "glue" in document:
        return _glue_entries(document)
    task, summary = document["task"], document["scores"]["summary"].get("dev")
    if summary is None:  # every seed diverged: no score to put on a card
        return []
    seeds = _seeds_said(document["scores"])
    source, labels, task_type = document.get("dataset"), None, TASK_TYPE
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
        dataset = dict(
            task_name=task_kinds.get(task["type"]).card_name, **_hub_dataset(source, "dev")
        )
        names, labels = list(summary), task.get("labels")
        task_type = task_kinds.get(task["type"]).card_type
    else:
        dataset = dict(task_name=task_kinds.get(task["type"]).card_name, **_own_files(document))
        names, labels = list(summary), task.get("labels")
        task_type = task_kinds.get(task["type"]).card_type
    found = [
        _result(m, summary[m]["mean"], f"{m} (dev, mean of {seeds})", labels, task_type, **dataset)
        for m in names
        if m in summary
    ]
    sweep = auto_rate.card_args(document)  # --learning_rate auto: how the rate was chosen
    for result in found if sweep else ():
        result.metric_args = {**(result.metric_args or {}), **sweep}
    return found


def _seeds_said(scores: dict) -> str:
    """`3 seed(s)`, or `2 seed(s); seed 3 diverged, left out`: what the mean is over."""
    summary = scores["summary"]
    said = f"{len(summary.get('seeds_in_mean', scores['seeds']))} seed(s)"
    diverged = [str(d["seed"]) for d in summary.get("diverged_seeds", ())]
    collapsed = [str(s) for s in summary.get("collapsed_seeds", ()) if str(s) not in diverged]
    if collapsed:  # at the constant answer's level: counted, as peers average, and said
        said += f"; seed {', '.join(collapsed)} collapsed, counted"
    if diverged:
        said += f"; seed {', '.join(diverged)} diverged, left out"
    return said


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
