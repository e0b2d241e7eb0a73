"""Labelled examples from JSONL, CSV or TSV files with named columns.

A task is single text or a text pair (`text_pair_column`), classification (label names
taken from the training file, sorted, so that ids do not depend on row order) or regression
(one number). Rows with an empty text are skipped and counted, rows lacking a text field
(absent, or null) too, apart (`skipped_malformed`); everything else that does not fit the
task (a missing column, a dev label the training file never uses, a regression label that is
not a number, a list where a text or label belongs, bytes that are not UTF-8) is a
`UserError` naming the file and row. A test split may have no labels at all (no label
column, or every label missing or -1 where -1 is no class): it is predicted, not scored.

Example:
    >>> spec = TaskSpec("classification", "sentence", None, "label")
    >>> train = read_split("train.tsv", spec)
    >>> label_names = spec_labels(train)             # ('negative', 'positive')
    >>> encode_labels(train, spec, label_names)      # np.array([1, 0, ...])
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import re

import numpy as np

from common import fs
from common.errors import UserError
from trainer.tasks import task_kinds

FORMATS = ("jsonl", "csv", "tsv", "hf")
_EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv"}
# An integer label: ASCII digits, one optional sign. str.isdigit() also takes '²' and other
# scripts' digits, some of which int() refuses: those labels are names, sorted as text.
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Python's csv refuses fields over 131,072 characters; JSONL has no such limit. A long text is
# cut at packing (--max_length) and counted, whatever the file's format.
_FIELD_LIMIT = 2**31 - 1
NO_LABEL = "-1"  # what datasets without public labels (GLUE's test splits) carry


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
    unlabelled: bool = False  # a test split without labels: predicted, not scored

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
    text = decoded(path, fs.read_bytes(path))
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
    rows = delimited_rows(path, reader)
    return list(reader.fieldnames or []), rows, {}


def decoded(path: str, data: bytes) -> str:
    """`data` as text (UTF-8, a byte-order mark dropped), or one line naming the first byte
    that is not UTF-8 and its line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        start = err.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        line = data[:start].count(b"\n") + 1
        raise UserError(
            f"{path} is not UTF-8: byte {start} (line {line}) is "
            f"{data[start : start + 1].hex()}; save the file as UTF-8"
        ) from None


@contextlib.contextmanager
def _long_fields():
    old = csv.field_size_limit(_FIELD_LIMIT)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def delimited_rows(path: str, reader) -> list:
    """Every row of a `csv` reader of `path`, fields of any length; a line csv cannot parse
    is one line naming it."""
    with _long_fields():
        try:
            return list(reader)
        except csv.Error as err:
            raise UserError(f"{path} line {reader.line_num}: {err}") from None


def _check_columns(path: str, columns: list[str], spec: TaskSpec, labelled: bool = True) -> None:
    wanted = [("--text_column", spec.text_column)]
    if labelled:
        wanted.append(("--label_column", spec.label_column))
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


def _scalar(path: str, number: int, column: str, value):
    """`value` unless it is a list or mapping: its Python repr is no text or label, and no
    one reading of it (joined with spaces? one example per item?) is obviously meant."""
    if isinstance(value, (list, tuple, dict)):
        kind = "mapping" if isinstance(value, dict) else "list"
        raise UserError(
            f"{path} row {number}: column {column!r} holds a {kind} "
            f"({json.dumps(value, default=str)[:60]}), not one value; give it as a string"
        )
    return value


def read_split(
    path: str, spec: TaskSpec, fmt: str | None = None, labels_optional: bool = False
) -> Split:
    """Reads one file's rows for `spec`; rows with an empty text (or second text) are
    skipped and counted, rows lacking one apart. `labels_optional` (a test split): a file
    without the label column reads with every label missing."""
    columns, rows, classes = read_rows(path, format_of(path, fmt))
    return split_from_rows(
        path, columns, rows, spec, classes.get(spec.label_column), labels_optional
    )


def split_from_rows(
    path: str,
    columns: list[str],
    rows: list[dict],
    spec: TaskSpec,
    classes: tuple | None = None,
    labels_optional: bool = False,
) -> Split:
    """The Split of rows already read (`path` names them in messages); `classes`: the label
    names the source declares, in id order (a Hugging Face ClassLabel)."""
    if not rows:
        raise UserError(f"{path} holds no rows")
    _check_columns(path, columns, spec, labelled=not labels_optional)
    split = Split(path, [], [] if spec.is_pair else None, [], [], label_names=classes)
    text_columns = [spec.text_column, *([spec.text_pair_column] if spec.is_pair else [])]
    for number, row in enumerate(rows, start=1):
        values = [_scalar(path, number, c, row.get(c)) for c in text_columns]
        label = _scalar(path, number, spec.label_column, row.get(spec.label_column))
        if None in values:  # absent or null: a missing value, not an empty text
            split.skipped_malformed += 1
            continue
        texts = [_text(value) for value in values]
        if not all(texts):
            split.skipped_empty += 1
            continue
        split.texts.append(texts[0])
        if spec.is_pair:
            split.pairs.append(texts[1])
        split.raw_labels.append(label)
        split.row_numbers.append(number)
    if not split.texts:
        raise UserError(f"{path}: every one of its {len(rows)} rows has an empty text or lacks one")
    return split


def label_names(train: Split) -> tuple[str, ...]:
    """The classes of a classification task: the names a Hugging Face ClassLabel declares,
    in its id order (class 1 stays the dataset's class 1: binary F1 is of it); else the
    training file's label values, sorted (as numbers when they all are integers, a sign
    allowed: 2 before 10, -1 before +1). Either way training must use two classes or more,
    and every row must have one."""
    names = [_text(value) for value in train.raw_labels]
    if train.label_names:
        for number, name in zip(train.row_numbers, names):
            if name not in train.label_names:
                raise UserError(
                    f"{train.path} row {number} has no label ({name or 'missing'}; the "
                    f"dataset's classes: {', '.join(train.label_names)})"
                )
    if "" in names:
        raise UserError(f"{train.path}: a row has an empty label")
    used = set(names)
    if len(used) < 2:
        raise UserError(
            f"{train.path}: every row has the label {used.pop()!r}; a "
            "classification task needs at least two labels"
        )
    if train.label_names:
        return tuple(train.label_names)
    if all(_INTEGER.fullmatch(name) for name in used):  # the same number twice: as written
        return tuple(sorted(used, key=lambda name: (int(name), name)))
    return tuple(sorted(used))


def check_trained_labels(train: Split, split: Split) -> None:
    """A dev or test label that training never uses is refused, as a file's is: its class
    is one the classifier never saw. Only a ClassLabel's classes can differ from training's
    labels (names from a file are training's labels: `encode_labels` refuses the rest)."""
    if split.unlabelled or not train.label_names:
        return
    used = {_text(value) for value in train.raw_labels}
    for number, value in zip(split.row_numbers, split.raw_labels):
        if _text(value) not in used:
            raise UserError(
                f"{split.path} row {number}: label {_text(value)!r} does not occur in the "
                f"training split (its labels: {', '.join(sorted(used))})"
            )


def mark_unlabelled(split: Split, names: tuple | None) -> bool:
    """Marks (and says whether) a test split has no labels at all: every one missing or
    empty, or -1 (GLUE's test splits) where -1 is not a class of the task."""
    labels = {_text(value) for value in split.raw_labels}
    empty = {""} if names is None or NO_LABEL in names else {"", NO_LABEL}
    split.unlabelled = labels <= empty
    return split.unlabelled


def encode_labels(split: Split, spec: TaskSpec, names: tuple | None) -> np.ndarray:
    """Class ids (int32) for classification, float32 targets for regression; None for an
    unlabelled test split."""
    if split.unlabelled:
        return None
    if not task_kinds.get(spec.task_type).named_classes:
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
