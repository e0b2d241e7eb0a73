"""GLUE's eight tasks (no WNLI) in the layout of its official download, and the GLUE score.

`--glue_dir DIR` holds either GLUE's own folders (`CoLA/train.tsv`, `MNLI/dev_matched.tsv`,
... as `download_glue_data.py` writes them) or, per task, a Hugging Face `save_to_disk`
folder of the `nyu-mll/glue` config (`DIR/cola/train`, `DIR/mnli/validation_matched`, ...).
Each task brings its columns, its label order (class 1 is GLUE's positive class, so binary
F1 is MRPC's and QQP's F1), its task type, the metric that selects the epoch and those it
reports, and its defaults: rate, epochs, batch and seeds (`RECIPE_SOURCE`).

The files' quirks, as GLUE ships them: CoLA's train.tsv and dev.tsv have no header row
(source, label, original label, sentence); MRPC's header begins with a byte-order mark;
MNLI's label is `gold_label` (dev files also hold the five annotators' labels) and it has
two dev files, matched (selection) and mismatched (reported with the suffix `_mm`, as
transformers' run_glue does); some QQP rows lack fields: those rows are skipped and counted
(`skipped_malformed`), as the loading script named below drops them. TSV is read without quoting:
GLUE's sentences hold bare quote characters.
Source: huggingface/datasets datasets/glue/glue.py (read GLUE's TSVs), download_glue_data.py.

Example:
    >>> splits = read(glue_dir, TASKS["mrpc"])    # {"train": Split, "dev": Split}
    >>> glue_score({"cola": {"mcc": 0.5}, "mrpc": {"accuracy": 0.8, "f1": 0.9}})
    {'tasks': {'cola': 0.5, 'mrpc': 0.85}, 'score': 0.675, ...}
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os

from common import fs
from common.errors import UserError
from trainer.tasks import datasets, task_kinds

# MNLI first: with --mnli_start, RTE, MRPC and STS-B start from its fine-tuned backbone.
ORDER = ("mnli", "cola", "sst2", "mrpc", "qqp", "stsb", "qnli", "rte")
MNLI_STARTED = ("rte", "mrpc", "stsb")
MISMATCHED = "_mm"
HUB_ID = "nyu-mll/glue"  # loaded by name where --task has no --glue_dir
RECIPE_SOURCE = (
    "learning rate, epochs and batch per task: ModernBERT's GLUE jobs (AnswerDotAI/bert24 "
    "src/evals/glue_jobs.py, forked from MosaicBERT's examples/benchmarks/bert glue.py), their "
    "defaults for base-size models; weight decay stays ours (0.01, AdamW's, scaled by the "
    "rate: theirs is decoupled, 1e-6..1e-5 absolute); seeds per task ours, more on the small "
    "noisy tasks as MosaicBERT's yaml does; a tiny model needs larger rates (--learning_rate "
    "overrides every task)"
)
SCORE_SOURCE = (
    "the unweighted mean of 8 task scores on dev, WNLI left out as BERT (Devlin et al. 2019: "
    "no submitted system beat its majority class) and MosaicBERT leave it out, so not the GLUE "
    "leaderboard's score, which also averages WNLI; a task with two metrics scores their mean, "
    "as GLUE reports them in pairs (MRPC, QQP: F1 and accuracy; STS-B: Pearson and Spearman; "
    "MosaicBERT scores STS-B by Spearman alone); MNLI is one task, the mean of matched and "
    "mismatched accuracy (not two columns, as BERT's average counts them); each metric is the "
    "mean over seeds first; checked against mosaicml/examples examples/benchmarks/bert/glue.py "
    "(per task the mean of its seeds' metrics, MNLI's two evaluators under one task, then the "
    "mean over tasks)"
)
LEFT_OUT = {"wnli": "no submitted system beat its majority class (BERT, Devlin et al. 2019)"}


@dataclasses.dataclass(frozen=True)
class TaskDefaults:
    """What a task runs with where the flags do not say (a GLUE task's own, cramming's for a
    task of one's own files, a size's: `recipes`). Not a `recipes.Recipe`: it holds the seeds,
    and the warmup, weight decay and metric come from elsewhere (flags, the task)."""

    learning_rate: float
    epochs: int
    batch_size: int
    seeds: tuple


@dataclasses.dataclass(frozen=True)
class GlueTask:
    name: str  # our --task name, also the nyu-mll/glue config
    folder: str  # the folder of GLUE's download
    text: str
    pair: str | None
    label: str
    labels: tuple  # class names in id order; () for regression
    metric: str  # selects the epoch
    reported: tuple  # what the task (and the GLUE score) reports
    defaults: TaskDefaults  # rate, epochs, batch, seeds (ModernBERT's: RECIPE_SOURCE)
    hf_text: str = ""  # the save_to_disk columns, where they differ from the TSV's
    hf_pair: str | None = None
    hf_labels: tuple = ()  # the ClassLabel names in id order, where they differ
    no_header: tuple = ()  # the columns of a TSV without a header row
    dev_files: tuple = (("dev", "dev.tsv", "validation"),)

    @property
    def task_type(self) -> str:
        kind = task_kinds.CLASSIFICATION if self.labels else task_kinds.REGRESSION
        return kind.name

    @property
    def spec(self) -> datasets.TaskSpec:
        return datasets.TaskSpec(self.task_type, "text", "pair" if self.pair else None, "label")


_BINARY = ("0", "1")
_SMALL, _MID, _LARGE = (1, 2, 3, 4, 5), (1, 2, 3), (1,)
TASKS = {
    task.name: task
    for task in (
        GlueTask(
            "cola",
            "CoLA",
            "sentence",
            None,
            "label",
            _BINARY,
            "mcc",
            ("mcc",),
            TaskDefaults(5e-5, 10, 32, _MID),
            hf_labels=("unacceptable", "acceptable"),
            no_header=("source", "label", "original_label", "sentence"),
        ),
        GlueTask(
            "sst2",
            "SST-2",
            "sentence",
            None,
            "label",
            _BINARY,
            "accuracy",
            ("accuracy",),
            TaskDefaults(3e-5, 3, 16, _MID),
            hf_labels=("negative", "positive"),
        ),
        GlueTask(
            "mrpc",
            "MRPC",
            "#1 String",
            "#2 String",
            "Quality",
            _BINARY,
            "f1",
            ("accuracy", "f1"),
            TaskDefaults(8e-5, 10, 32, _SMALL),
            "sentence1",
            "sentence2",
            ("not_equivalent", "equivalent"),
        ),
        GlueTask(
            "qqp",
            "QQP",
            "question1",
            "question2",
            "is_duplicate",
            _BINARY,
            "f1",
            ("accuracy", "f1"),
            TaskDefaults(3e-5, 5, 16, _MID),
            hf_labels=("not_duplicate", "duplicate"),
        ),
        GlueTask(
            "stsb",
            "STS-B",
            "sentence1",
            "sentence2",
            "score",
            (),
            "spearman",
            ("pearson", "spearman"),
            TaskDefaults(3e-5, 10, 32, _SMALL),
            hf_pair="sentence2",
            hf_text="sentence1",
        ),
        GlueTask(
            "mnli",
            "MNLI",
            "sentence1",
            "sentence2",
            "gold_label",
            ("contradiction", "entailment", "neutral"),
            "accuracy",
            ("accuracy",),
            TaskDefaults(5e-5, 2, 64, _LARGE),
            "premise",
            "hypothesis",
            ("entailment", "neutral", "contradiction"),
            dev_files=(
                ("dev", "dev_matched.tsv", "validation_matched"),
                ("test", "dev_mismatched.tsv", "validation_mismatched"),
            ),
        ),
        GlueTask(
            "qnli",
            "QNLI",
            "question",
            "sentence",
            "label",
            ("entailment", "not_entailment"),
            "accuracy",
            ("accuracy",),
            TaskDefaults(1e-5, 10, 16, _MID),
        ),
        GlueTask(
            "rte",
            "RTE",
            "sentence1",
            "sentence2",
            "label",
            ("entailment", "not_entailment"),
            "accuracy",
            ("accuracy",),
            TaskDefaults(1e-5, 3, 16, _SMALL),
        ),
    )
}
NAMES = (*ORDER, "glue")


def tasks_of(name: str) -> list[GlueTask]:
    return [TASKS[n] for n in ORDER] if name == "glue" else [TASKS[name]]


def _tsv_rows(path: str, task: GlueTask) -> list[dict]:
    """Rows of a GLUE TSV as {text, pair, label} (None where a field is missing)."""
    text = datasets.decoded(path, fs.read_bytes(path))  # MRPC's header starts with a BOM
    reader = csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    lines = datasets.delimited_rows(path, reader)
    header = list(task.no_header) or (lines.pop(0) if lines else [])
    wanted = {"text": task.text, "pair": task.pair, "label": task.label}
    missing = [c for c in wanted.values() if c and c not in header]
    if missing:
        raise UserError(
            f"{path} is not GLUE's {task.folder} file: no column "
            f"{', '.join(map(repr, missing))} in its header ({', '.join(header)})"
        )
    where = {key: header.index(column) for key, column in wanted.items() if column}
    return [
        {"pair": None, **{key: fields[i] if i < len(fields) else None for key, i in where.items()}}
        for fields in lines
        if fields
    ]


def _hf_rows(path: str, task: GlueTask) -> list[dict]:
    """Rows of a save_to_disk split as {text, pair, label}, class names mapped to GLUE's."""
    columns, rows, _ = datasets.read_saved_dataset(path)
    return _glue_rows(path, columns, rows, task)


def _glue_rows(path: str, columns: list, rows: list[dict], task: GlueTask) -> list[dict]:
    """nyu-mll/glue rows (save_to_disk or by name) as {text, pair, label}, class names mapped
    to GLUE's."""
    names = {"text": task.hf_text or task.text, "pair": task.hf_pair or task.pair, "label": "label"}
    missing = [c for c in names.values() if c and c not in columns]
    if missing:
        raise UserError(
            f"{path} is not the nyu-mll/glue {task.name} config: no column "
            f"{', '.join(map(repr, missing))} (its columns: {', '.join(columns)})"
        )
    to_glue = {
        hf: task.labels[i] if task.labels == _BINARY else hf
        for i, hf in enumerate(task.hf_labels or task.labels)
    }
    return [
        {
            "text": row[names["text"]],
            "pair": row[names["pair"]] if task.pair else None,
            "label": to_glue.get(row["label"], row["label"]),
        }
        for row in rows
    ]


def _split(path: str, rows: list[dict], task: GlueTask) -> datasets.Split:
    """Rows lacking a field (QQP's broken lines) are skipped and counted as malformed."""
    whole = [
        r
        for r in rows
        if None not in (r["text"], r["label"]) and (r["pair"] is not None or not task.pair)
    ]
    if not whole:
        raise UserError(f"{path} holds no complete row of GLUE's {task.folder}")
    columns = ["text", "label", *(["pair"] if task.pair else [])]
    split = datasets.split_from_rows(path, columns, whole, task.spec)
    split.skipped_malformed = len(rows) - len(whole)
    for number, label in zip(split.row_numbers, split.raw_labels):
        if task.labels and str(label).strip() not in task.labels:
            raise UserError(
                f"{path} row {number}: label {label!r} is not one of GLUE's "
                f"{task.folder} labels ({', '.join(task.labels)})"
            )
    return split


def locate(glue_dir: str, task: GlueTask) -> tuple[str, dict]:
    """("tsv" or "hf", {split: path}) of one task in `glue_dir`, or a UserError naming both
    layouts it looked for."""
    tsv = fs.join(glue_dir, task.folder)
    if fs.exists(fs.join(tsv, "train.tsv")):
        return "tsv", {
            "train": fs.join(tsv, "train.tsv"),
            **{split: fs.join(tsv, name) for split, name, _ in task.dev_files},
        }
    hf = os.path.join(glue_dir, task.name)
    if not fs.is_remote(glue_dir) and os.path.isdir(os.path.join(hf, "train")):
        return "hf", {
            "train": os.path.join(hf, "train"),
            **{split: os.path.join(hf, name) for split, _, name in task.dev_files},
        }
    raise UserError(
        f"{glue_dir} holds neither GLUE's {task.folder}/train.tsv nor a "
        f"save_to_disk folder {task.name}/train of nyu-mll/glue"
    )


def read(glue_dir: str, task: GlueTask) -> dict:
    """{"train", "dev" (and for MNLI "test": the mismatched dev set): Split}."""
    layout, paths = locate(glue_dir, task)
    rows_of = _tsv_rows if layout == "tsv" else _hf_rows
    found = {}
    for split, path in paths.items():
        if layout == "tsv" and not fs.exists(path):
            raise UserError(
                f"{path} is missing: GLUE's {task.folder} has "
                f"{', '.join(n for _, n, _ in task.dev_files)} beside train.tsv"
            )
        found[split] = _split(path, rows_of(path, task), task)
    return found


def read_hub(task: GlueTask, revision: str | None = None) -> tuple[dict, dict]:
    """({"train", "dev" (MNLI also "test"): Split}, provenance) of the task's nyu-mll/glue
    config, loaded by name (`trainer/tasks/hub.py`): the Hub, else the datasets cache."""
    from trainer.tasks import hub

    loaded = hub.load(
        HUB_ID,
        task.name,
        revision,
        hint="--glue_dir DIR (GLUE's download or save_to_disk folders DIR/TASK/train, ...)",
    )
    used = hub.choose_splits(
        loaded, {"train": "train", **{split: name for split, _, name in task.dev_files}}
    )
    found = {}
    for split, name in used.items():
        columns, rows, _ = datasets.dataset_rows(loaded.splits[name])
        label = loaded.label(name)
        found[split] = _split(label, _glue_rows(label, columns, rows, task), task)
    print(loaded.said(used, {n: len(split) for n, split in found.items()}), flush=True)
    return found, loaded.provenance(used)


def reported(task: GlueTask, summary: dict) -> dict:
    """{metric: mean over seeds} of what the task reports; MNLI's mismatched set (the
    protocol's test slot) as `accuracy_mm`."""
    means = {m: summary["dev"][m]["mean"] for m in task.reported}
    if task.name == "mnli" and "test" in summary:
        means["accuracy" + MISMATCHED] = summary["test"]["accuracy"]["mean"]
    return means


def glue_score(task_scores: dict) -> dict:
    """{tasks: {task: mean of its reported metrics}, score: mean of those, source}."""
    tasks = {name: sum(values.values()) / len(values) for name, values in task_scores.items()}
    score = sum(tasks.values()) / len(tasks) if tasks else None
    return {
        "tasks": tasks,
        "score": score,
        "complete": set(tasks) == set(ORDER),
        "left_out": LEFT_OUT,
        "source": SCORE_SOURCE,
    }
