"""Labelled examples from JSONL, CSV or TSV files with named columns.

A task is single text or a text pair (`text_pair_column`), classification (label names
taken from the training file, sorted, so that ids do not depend on row order) or regression
(one number). Rows with an empty text are skipped and counted; everything else that does not
fit the task (a missing column, a dev label the training file never uses, a regression label
that is not a number) is a `UserError` naming the file and row.

Example:
    >>> spec = TaskSpec("classification", "sentence", None, "label")
    >>> train = read_split("train.tsv", spec)
    >>> label_names = spec_labels(train)             # ('negative', 'positive')
    >>> encode_labels(train, spec, label_names)      # np.array([1, 0, ...])
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os

import numpy as np

from common import fs
from common.errors import UserError

FORMATS = ("jsonl", "csv", "tsv", "hf")
TASK_TYPES = ("classification", "regression")
_EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv"}


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    task_type: str  # "classification" or "regression"
    text_column: str
    text_pair_column: str | None
    label_column: str

    @property
    def is_pair(self) -> bool:
        return bool(self.text_pair_column)


@dataclasses.dataclass
class Split:
    """One file's usable rows: texts (and second texts), raw label values, skip counts."""

    path: str
    texts: list
    pairs: list | None
    raw_labels: list
    row_numbers: list  # each example's row in the file (1 = the first data row)
    skipped_empty: int = 0
    skipped_malformed: int = 0  # rows lacking a field (GLUE's QQP has some)
    label_names: tuple | None = None  # declared by the source (a ClassLabel), in id order

    def __len__(self) -> int:
        return len(self.texts)


def format_of(path: str, declared: str | None = None) -> str:
    """The file format: `declared`, else a folder is a Hugging Face `save_to_disk` dataset,
    else by extension."""
    if declared:
        return declared
    if not fs.is_remote(path) and os.path.isdir(path):
        return "hf"
    for extension, name in _EXTENSIONS.items():
        if path.lower().endswith(extension):
            return name
    raise UserError(
        f"{path}: cannot tell the format from the name; name it .jsonl, .csv, "
        ".tsv or a save_to_disk folder, or give --input_format"
    )


def dataset_rows(dataset) -> tuple[list[str], list[dict], dict]:
    """(columns, rows, {column: class names in id order}) of a `datasets.Dataset`: a class
    label column's ids become its names, as the dataset's card shows them."""
    import datasets

    rows = dataset.to_list()
    classes = {}
    for name, feature in dataset.features.items():
        if isinstance(feature, datasets.ClassLabel):
            classes[name] = tuple(feature.names)
            for row in rows:  # -1 (no label, GLUE's test splits) stays a number
                value = row[name]
                row[name] = feature.int2str(value) if 0 <= value < feature.num_classes else value
    return list(dataset.column_names), rows, classes


def read_saved_dataset(path: str) -> tuple[list[str], list[dict], dict]:
    """`dataset_rows` of a `datasets` `save_to_disk` folder holding one split."""
    import datasets

    if os.path.exists(os.path.join(path, "dataset_dict.json")):
        splits = sorted(n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n)))
        raise UserError(
            f"{path} holds several splits ({', '.join(splits)}): name one "
            f"folder, e.g. {os.path.join(path, splits[0] if splits else 'train')}"
        )
    try:
        dataset = datasets.load_from_disk(path)
    except FileNotFoundError as err:
        raise UserError(f"{path} is not a Hugging Face save_to_disk folder: {err}") from None
    return dataset_rows(dataset)


def read_rows(path: str, fmt: str) -> tuple[list[str], list[dict], dict]:
    """(column names, rows as dicts, {column: class names}) of one file; only a Hugging Face
    dataset declares class names."""
    if fmt == "hf":
        return read_saved_dataset(path)
    text = fs.read_bytes(path).decode("utf-8-sig")
    if fmt == "jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                raise UserError(f"{path} line {number} is not JSON: {err}") from None
            if not isinstance(row, dict):
                raise UserError(f"{path} line {number} is not a JSON object")
            rows.append(row)
        columns = list(dict.fromkeys(key for row in rows for key in row))
        return columns, rows, {}
    # GLUE's TSV files hold bare quote characters inside texts: no quoting in TSV.
    reader = csv.DictReader(
        io.StringIO(text),
        delimiter="\t" if fmt == "tsv" else ",",
        quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL,
    )
    rows = list(reader)
    return list(reader.fieldnames or []), rows, {}


def _check_columns(path: str, columns: list[str], spec: TaskSpec) -> None:
    wanted = [("--text_column", spec.text_column), ("--label_column", spec.label_column)]
    if spec.is_pair:
        wanted.insert(1, ("--text_pair_column", spec.text_pair_column))
    for flag, name in wanted:
        if name not in columns:
            pair = (
                " (a text-pair task needs both text columns in every file)"
                if flag == "--text_pair_column"
                else ""
            )
            raise UserError(
                f"{path} has no column {name!r} ({flag}){pair}; its columns: "
                f"{', '.join(columns) or 'none'}"
            )


def _text(value) -> str:
    return "" if value is None else str(value).strip()


def read_split(path: str, spec: TaskSpec, fmt: str | None = None) -> Split:
    """Reads one file's rows for `spec`; rows with an empty text (or second text) are
    skipped and counted."""
    columns, rows, classes = read_rows(path, format_of(path, fmt))
    return split_from_rows(path, columns, rows, spec, classes.get(spec.label_column))


def split_from_rows(
    path: str, columns: list[str], rows: list[dict], spec: TaskSpec, classes: tuple | None = None
) -> Split:
    """The Split of rows already read (`path` names them in messages); `classes`: the label
    names the source declares, in id order (a Hugging Face ClassLabel)."""
    if not rows:
        raise UserError(f"{path} holds no rows")
    _check_columns(path, columns, spec)
    split = Split(path, [], [] if spec.is_pair else None, [], [], label_names=classes)
    for number, row in enumerate(rows, start=1):
        first = _text(row.get(spec.text_column))
        second = _text(row.get(spec.text_pair_column)) if spec.is_pair else None
        if not first or (spec.is_pair and not second):
            split.skipped_empty += 1
            continue
        split.texts.append(first)
        if spec.is_pair:
            split.pairs.append(second)
        split.raw_labels.append(row.get(spec.label_column))
        split.row_numbers.append(number)
    if not split.texts:
        raise UserError(f"{path}: every one of its {len(rows)} rows has an empty text")
    return split


def label_names(train: Split) -> tuple[str, ...]:
    """The classes of a classification task: the names a Hugging Face ClassLabel declares,
    in its id order (class 1 stays the dataset's class 1: binary F1 is of it); else the
    training file's label values, sorted (as numbers when they all are integers: 2 before
    10)."""
    if train.label_names:
        return tuple(train.label_names)
    names = {_text(value) for value in train.raw_labels}
    if "" in names:
        raise UserError(f"{train.path}: a row has an empty label")
    if len(names) < 2:
        raise UserError(
            f"{train.path}: every row has the label {names.pop()!r}; a "
            "classification task needs at least two labels"
        )
    numeric = all(name.lstrip("-").isdigit() for name in names)
    return tuple(sorted(names, key=int if numeric else None))


def encode_labels(split: Split, spec: TaskSpec, names: tuple | None) -> np.ndarray:
    """Class ids (int32) for classification, float32 targets for regression."""
    if spec.task_type == "regression":
        return np.array(
            [
                _number(split.path, row, value)
                for row, value in zip(split.row_numbers, split.raw_labels)
            ],
            np.float32,
        )
    index = {name: i for i, name in enumerate(names)}
    ids = []
    for number, value in zip(split.row_numbers, split.raw_labels):
        label = _text(value)
        if label not in index:
            where = "the dataset's classes" if split.label_names else "the training file"
            raise UserError(
                f"{split.path} row {number}: label {label!r} does not occur in "
                f"{where} (its labels: {', '.join(names)})"
            )
        ids.append(index[label])
    return np.array(ids, np.int32)


def _number(path: str, number: int, value) -> float:
    try:
        result = float(value)
    except (TypeError, ValueError):
        result = math.nan
    if not math.isfinite(result):
        raise UserError(f"{path} row {number}: regression label {value!r} is not a finite number")
    return result
