"""The texts of evaluation files, for decontamination (beam_pipelines/decontamination.py):
JSONL, or TSV/CSV with a header row, optionally `.gz`; local or gs://. Read whole on the
launcher with the standard library (evaluation sets are small; the trainer's task readers
import TensorFlow, which Dataflow workers do not have).

- JSONL (`.jsonl`, `.json`, `.ndjson`): one object per line; a text column's value is a
  string or a list of strings (a pairs file's negatives), each one text.
- TSV (`.tsv`): tab-separated with no quoting, as GLUE ships them (a quote is a character).
  CSV (`.csv`): the `csv` module's default dialect (quoted fields may hold commas).
  The first row names the columns; a byte-order mark before it is dropped (GLUE's MRPC).
  A file without a header row (GLUE's CoLA) has no text column: give its text column a name.

Every text of every asked column that is present is read; blank ones are not texts. A
file is refused in one line (`EvalFileError`) when it cannot be read as its kind (invalid
UTF-8, a malformed JSON line), has none of the asked columns, or holds no text.

Example:
    >>> read_texts("glue/SST-2/dev.tsv", ("text", "sentence")).texts[:1]
    ["it 's a charming and often affecting journey . "]
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import io
import json

from common import fs
from common.errors import UserError

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
TABLE_SUFFIXES = {".tsv": "\t", ".csv": ","}
csv.field_size_limit(2**31 - 1)  # a passage may be longer than csv's 128 KB default


class EvalFileError(UserError):
    """An evaluation file that cannot be checked against: one line naming it and why."""


@dataclasses.dataclass(frozen=True)
class EvalFile:
    path: str
    sha256: str  # of the file's bytes as stored (compressed, if it is)
    num_bytes: int
    columns: tuple[str, ...]  # the asked columns it has
    texts: tuple[str, ...]

    def record(self) -> dict:
        """What the manifest records of it."""
        return {
            "path": self.path,
            "sha256": self.sha256,
            "bytes": self.num_bytes,
            "columns": list(self.columns),
            "texts": len(self.texts),
        }


def _kind(path: str) -> str:
    name = path.lower().removesuffix(".gz")
    for suffix in (*JSONL_SUFFIXES, *TABLE_SUFFIXES):
        if name.endswith(suffix):
            return suffix
    raise EvalFileError(
        f"evaluation file {path} is not .jsonl, .tsv or .csv (optionally .gz): "
        "its format cannot be told from its name"
    )


def _values(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _jsonl(path: str, text: str, columns: tuple) -> tuple[set, list[str], list]:
    """(columns found, texts, the first record's keys) of a JSONL file."""
    found, texts, keys = set(), [], []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise EvalFileError(f"{path}:{number}: malformed JSON ({err})") from None
        if not isinstance(row, dict):
            raise EvalFileError(f"{path}:{number}: a JSON {type(row).__name__}, not an object")
        keys = keys or list(row)
        for column in columns:
            if column in row:
                found.add(column)
                texts += _values(row[column])
    return found, texts, keys


def _table(path: str, text: str, columns: tuple, delimiter: str) -> tuple[set, list[str], list]:
    """(columns found, texts, the header) of a TSV or CSV file with a header row."""
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    try:
        rows = list(csv.reader(io.StringIO(text), delimiter=delimiter, quoting=quoting))
    except csv.Error as err:
        raise EvalFileError(f"{path}: not a readable table ({err})") from None
    header = rows[0] if rows else []
    where = {c: header.index(c) for c in columns if c in header}
    texts = [row[i] for row in rows[1:] for i in where.values() if i < len(row)]
    return set(where), texts, header


def read_texts(path: str, columns: tuple[str, ...]) -> EvalFile:
    """The texts of `columns` in one evaluation file (see the module docstring)."""
    kind = _kind(path)
    raw = fs.read_bytes(path)
    try:
        data = gzip.decompress(raw) if path.lower().endswith(".gz") else raw
        text = data.decode("utf-8-sig")
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise EvalFileError(f"evaluation file {path} cannot be read: {err}") from None
    if not text.strip():
        raise EvalFileError(f"evaluation file {path} is empty")
    if kind in JSONL_SUFFIXES:
        found, texts, names = _jsonl(path, text, columns)
    else:
        found, texts, names = _table(path, text, columns, TABLE_SUFFIXES[kind])
    if not found:
        has = ", ".join(names[:12]) or "none"
        raise EvalFileError(
            f"evaluation file {path} has no text column among --decontam_columns "
            f"({', '.join(columns)}); its columns: {has}"
        )
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise EvalFileError(f"evaluation file {path} holds no text in {', '.join(sorted(found))}")
    ordered = tuple(c for c in columns if c in found)
    return EvalFile(path, hashlib.sha256(raw).hexdigest(), len(raw), ordered, tuple(texts))
