"""A retrieval data set in BEIR's layout, read and checked: `corpus.jsonl`, `queries.jsonl` and
`qrels/<split>.tsv` in one folder (local or gs://).

What BEIR's own loader (beir-cellar/beir, beir/datasets/data_loader.py, `GenericDataLoader`)
reads, and how this reading matches it:

- corpus.jsonl: one JSON object a line, `_id`, `text` and an optional `title`. A model sees
  `(title + " " + text).strip()`, as BEIR's dense models build their input
  (beir/retrieval/models/util.py, `extract_corpus_sentences`); no title is an empty one. An
  empty text under a title is kept (the title is retrievable); a document whose title and
  text are both empty is an error. Read line by line: the file is never held whole.
- queries.jsonl: `_id` and `text`. Only the queries judged in the split are evaluated (BEIR
  keeps `{qid: queries[qid] for qid in qrels}`); the others are counted, `queries_left_out`.
- qrels/<split>.tsv: tab-separated, a header line `query-id corpus-id score` (BEIR skips the
  first line unread; here it must be that header, so that a file without one is not silently
  one judgement short), then one integer grade a (query, document) pair. A pair given twice
  keeps its last grade, as BEIR's dict does. A grade of 0 or below is judged not relevant
  (trec_eval: gain only above 0); such a query still counts, and scores 0.
- ids are strings (a JSON integer `_id` is taken as its decimal text, the form qrels use).

Bad input is one line naming the file and line (`UserError`): a missing file, a line that is
not a JSON object, a missing or empty `_id` or text, an id given twice, a qrels row without
exactly three columns or with a grade that is not an integer, qrels naming query or document
ids that queries.jsonl or corpus.jsonl lack (counted, the first named), a split with no
judgements (or no header line).

Example:
    >>> data = read("beir/scifact", "test")
    >>> len(data.corpus), len(data.queries), data.queries_left_out
    (5183, 300, 809)
    >>> data.qrels[next(iter(data.queries))]          # {document id: grade}
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re

from common import fs
from common.errors import UserError
from trainer.tasks import datasets, json_lines
from trainer.tasks.json_lines import one_line

CORPUS = "corpus.jsonl"
QUERIES = "queries.jsonl"
QRELS = "qrels"
HEADER = ("query-id", "corpus-id", "score")
# A grade: ASCII digits, one optional sign (str.isdigit() also takes '²').
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclasses.dataclass(frozen=True)
class RetrievalData:
    """One split of a BEIR folder; dicts keep their file's order."""

    folder: str
    split: str
    corpus: dict[str, str]  # document id -> "title text", as a model reads it
    queries: dict[str, str]  # the judged queries only: id -> text
    qrels: dict[str, dict[str, int]]  # query id -> {document id: grade}
    queries_left_out: int  # queries in queries.jsonl that the split does not judge


def _check_exists(path: str) -> None:
    if not fs.exists(path):
        raise UserError(
            f"{path} is missing: a BEIR folder holds {CORPUS}, {QUERIES} and {QRELS}/<split>.tsv"
        )


def _id(path: str, number: int, row: dict) -> str:
    value = row.get("_id")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        what = "no _id" if value is None else f"_id {one_line(repr(value))[:60]}"
        raise UserError(f"{path} line {number} has {what}: each line needs a non-empty string _id")
    return value


def _field(path: str, number: int, row: dict, name: str, required: bool = True) -> str:
    value = row.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        what = "no" if value is None else "a non-string"
        raise UserError(f"{path} line {number} has {what} {name!r}; it must be a string")
    return value


def _read_texts(path: str, document: bool) -> dict[str, str]:
    """{id: text} of corpus.jsonl (`document`: title and text joined) or queries.jsonl."""
    texts = {}
    for number, row in json_lines.rows(path):
        key = _id(path, number, row)
        text = _field(path, number, row, "text")
        if document:
            text = f"{_field(path, number, row, 'title', required=False)} {text}".strip()
        if not text.strip():
            empty = "title and text" if document else "text"
            raise UserError(f"{path} line {number} ({key!r}) has an empty {empty}")
        if key in texts:
            raise UserError(f"{path} line {number} repeats _id {key!r}; ids must be unique")
        texts[key] = text
    return texts


def _qrels_rows(path: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of every judgement row; the header line checked and dropped."""
    text = datasets.decoded(path, fs.read_bytes(path))
    reader = csv.reader(io.StringIO(text), delimiter="\t")  # BEIR's reader, quoting included
    rows = []
    try:
        for row in reader:
            if row:  # a blank line
                rows.append((reader.line_num, row))
    except csv.Error as err:
        raise UserError(f"{path} line {reader.line_num}: {one_line(err)}") from None
    header = f"the header {' '.join(HEADER)} (tab-separated; BEIR's loader skips line 1 unread)"
    if not rows:
        raise UserError(f"{path} is empty: it needs {header}, then one judgement a line")
    line, first = rows[0]
    if tuple(field.strip() for field in first) != HEADER:
        found = one_line(repr("\t".join(first)))[:80]
        raise UserError(f"{path} line {line} is {found}, not {header}")
    return rows[1:]


def read_qrels(path: str) -> tuple[dict[str, dict[str, int]], dict]:
    """(qrels, {(query or document, id): line of its first row}) of one qrels file."""
    qrels, first_lines = {}, {}
    for number, row in _qrels_rows(path):
        if len(row) != 3:
            raise UserError(
                f"{path} line {number} has {len(row)} columns, not 3 "
                f"({', '.join(HEADER)}, tab-separated)"
            )
        query_id, doc_id, grade = row
        if not _INTEGER.fullmatch(grade.strip()):
            raise UserError(
                f"{path} line {number}: score {one_line(repr(grade))[:40]} is not an integer"
            )
        qrels.setdefault(query_id, {})[doc_id] = int(grade)  # a repeated pair: the last
        first_lines.setdefault(("query", query_id), number)
        first_lines.setdefault(("document", doc_id), number)
    if not qrels:
        raise UserError(f"{path} holds no judgements (only its header)")
    return qrels, first_lines


def _check_ids(path: str, first_lines: dict, known: dict) -> None:
    """A qrels file that names ids the corpus or queries lack is one line: how many of each,
    and the first of them with its line."""
    problems = []
    for kind, file in (("query", QUERIES), ("document", CORPUS)):
        unknown = [
            (n, i) for (k, i), n in first_lines.items() if k == kind and i not in known[kind]
        ]
        if unknown:
            line, first = min(unknown)
            problems.append(
                f"{len(unknown)} {kind} id(s) not in {file} (first {first!r}, line {line})"
            )
    if problems:
        raise UserError(f"{path} names {' and '.join(problems)}")


def _split_path(folder: str, split: str) -> str:
    path = fs.join(folder, QRELS, f"{split}.tsv")
    if not fs.exists(path):
        found = [
            fs.basename(p).removesuffix(".tsv") for p in fs.glob_in(fs.join(folder, QRELS), "*.tsv")
        ]
        raise UserError(
            f"{path} is missing: split {split!r} has no qrels; splits there: "
            f"{', '.join(found) or 'none'}"
        )
    return path


def read(folder: str, split: str) -> RetrievalData:
    """The split `split` of the BEIR folder `folder`, checked (module docstring)."""
    corpus_path, queries_path = fs.join(folder, CORPUS), fs.join(folder, QUERIES)
    for path in (corpus_path, queries_path):
        _check_exists(path)
    qrels_path = _split_path(folder, split)
    qrels, first_lines = read_qrels(qrels_path)  # first: a bad split fails before the corpus
    queries = _read_texts(queries_path, document=False)
    corpus = _read_texts(corpus_path, document=True)
    _check_ids(qrels_path, first_lines, {"query": queries, "document": corpus})
    judged = {key: text for key, text in queries.items() if key in qrels}
    return RetrievalData(
        folder=folder,
        split=split,
        corpus=corpus,
        queries=judged,
        qrels=qrels,
        queries_left_out=len(queries) - len(judged),
    )
