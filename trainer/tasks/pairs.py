"""Query-document pairs for contrastive training: a JSONL file read and checked (local or
gs://), and an epoch's batches in which no text occurs twice.

The file: one JSON object a line, `query` and `positive` (non-empty strings) and an optional
`negative`, the pair's hard negatives: one string or a list of them (null or [] for none).
Other fields are ignored; blank lines are skipped. Texts are kept as written, less the
whitespace at either end (trainer/tasks/datasets.py reads task texts the same way). Every
pair must give the same number of hard negatives, since a batch's shapes are fixed (XLA
compiles one program); a negative may not be its own pair's query or positive (as compared
below), which would ask the model to push a text away from itself.

Bad input is one line naming the file and line (`UserError`, exit 2): a missing file, a line
that is not a JSON object (bytes that are not UTF-8 included), a query or positive that is
missing, not a string or empty (whitespace only), a negative that is empty or not a string,
a number of negatives unlike the first pair's, a file holding no pairs.

Batches (`batches`): in-batch negatives score every query against every other pair's
documents, so a text occurring twice in one batch makes a copy of a positive count as a
negative (a false negative). As sentence-transformers' NoDuplicatesBatchSampler does
(UKPLab/sentence-transformers, sentence_transformers/sampler.py), the pairs are shuffled,
then each batch takes them in that order, passing over a pair one of whose texts (query,
positive or a negative) the batch already holds; a pair passed over is deferred, and the
next batches try the deferred pairs first (they came earlier in the order). Texts are
compared by `text_key`. Every pair is placed exactly once an epoch. A batch that cannot be
filled without a duplicate forms only once every pair has been tried (the end of the
epoch): it is dropped, its pairs counted, unless `drop_last=False` keeps it short.

Example:
    >>> pairs = read("gs://bucket/train.jsonl")
    >>> packing = batches(pairs, batch_size=64, seed=7 + epoch)
    >>> packing.batches[0]            # 64 pair indices, no text twice
    >>> packing.dropped               # the pairs of the short batches left out
"""

from __future__ import annotations

import dataclasses
import unicodedata

import numpy as np
import orjson

from common import fs
from common.errors import UserError
from trainer.tasks import json_lines
from trainer.tasks.json_lines import one_line

FIELDS = ("query", "positive", "negative")


@dataclasses.dataclass(frozen=True)
class Pairs:
    """A pair file's pairs, in file order; `negatives[i]` holds pair i's hard negatives (the
    same number for every pair, `hard_negatives`)."""

    path: str
    queries: tuple[str, ...]
    positives: tuple[str, ...]
    negatives: tuple[tuple[str, ...], ...]
    line_numbers: tuple[int, ...]  # each pair's line in the file (1 = the first line)

    def __len__(self) -> int:
        return len(self.queries)

    @property
    def hard_negatives(self) -> int:
        return len(self.negatives[0]) if self.negatives else 0

    def texts(self, index: int) -> tuple[str, ...]:
        """Pair `index`'s texts: query, positive, then its negatives."""
        return (self.queries[index], self.positives[index], *self.negatives[index])


@dataclasses.dataclass(frozen=True)
class Packing:
    """One epoch's batches of pair indices and what packing them cost."""

    batches: tuple[tuple[int, ...], ...]
    dropped: tuple[int, ...]  # pairs of the short batches dropped (drop_last)
    deferred: int  # how many times a pair was passed over for a text the batch held


def text_key(text: str) -> str:
    """What two texts are compared as: Unicode NFKC, case folded, whitespace runs as one
    space, none at either end. Broader than equality on purpose: taking two texts for one
    only defers a pair, missing a copy leaves a false negative in the batch.

    >>> text_key("  Café\\tAU  lait ") == text_key("café au LAIT")
    True
    """
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _json_lines(path: str):
    """(line number, object) of a pair file's lines (`json_lines.rows`)."""
    if not fs.exists(path):
        raise UserError(
            f"{path} is missing: a pair file is JSONL, a query and a positive on each line"
        )
    yield from json_lines.rows(path)


def _side(path: str, number: int, row: dict, name: str) -> str:
    value = row.get(name)
    if isinstance(value, str) and value.strip():
        return value.strip()
    if value is None:
        what = f"no {name!r}"
    elif isinstance(value, str):
        what = f"an empty {name!r}"
    else:
        what = f"a non-string {name!r} ({one_line(orjson.dumps(value).decode())[:60]})"
    raise UserError(
        f"{path} line {number} has {what}; each pair needs a non-empty query and positive"
    )


def _negatives(path: str, number: int, row: dict, own: tuple[str, str]) -> tuple[str, ...]:
    value = row.get("negative")
    values = [] if value is None else [value] if isinstance(value, str) else value
    if not isinstance(values, list):
        values = [values]  # a number or mapping: refused below, as an item would be
    own_keys = {text_key(text) for text in own}
    negatives = []
    for place, item in enumerate(values, start=1):
        if not isinstance(item, str) or not item.strip():
            what = "empty" if isinstance(item, str) else "not a string"
            shown = one_line(orjson.dumps(item).decode())[:60]
            raise UserError(
                f"{path} line {number}: negative {place} ({shown}) is {what}; 'negative' is a "
                "non-empty string or a list of them"
            )
        if text_key(item) in own_keys:
            raise UserError(
                f"{path} line {number}: negative {place} is the pair's own query or positive"
            )
        negatives.append(item.strip())
    return tuple(negatives)


def read(path: str) -> Pairs:
    """The pairs of one JSONL file (local or gs://), checked; see the module's docstring."""
    return from_rows(path, _json_lines(path))


def from_rows(path: str, numbered_rows) -> Pairs:
    """The pairs of `numbered_rows` ((line number, object) of `path`, a file or a dataset's
    split as messages name it), checked as a file's lines are."""
    columns = ([], [], [], [])
    first = None  # (line, number of negatives) of the first pair
    for number, row in numbered_rows:
        query, positive = _side(path, number, row, "query"), _side(path, number, row, "positive")
        negatives = _negatives(path, number, row, (query, positive))
        if first is None:
            first = (number, len(negatives))
        elif len(negatives) != first[1]:
            raise UserError(
                f"{path} line {number} gives {len(negatives)} negative(s) where line {first[0]} "
                f"gives {first[1]}: every pair needs the same number (a batch's shapes are fixed)"
            )
        for column, value in zip(columns, (query, positive, negatives, number)):
            column.append(value)
    if first is None:
        raise UserError(f"{path} holds no pairs: each line needs a query and a positive")
    return Pairs(path, *(tuple(column) for column in columns))


def dataset_rows(columns: list, rows: list):
    """(row number, {query, positive, negative}) of a dataset's rows: its `query`, `positive`
    and `negative` columns where it has the first two, else sentence-transformers' convention
    (the first column the query, the second the positive, any others hard negatives)."""
    if "query" in columns and "positive" in columns:
        yield from enumerate(rows, start=1)
        return
    if len(columns) < 2:
        raise UserError(f"a pair dataset needs a query and a positive column; it has {columns}")
    query, positive, *others = columns
    for number, row in enumerate(rows, start=1):
        negatives = [row[name] for name in others]
        yield number, {"query": row[query], "positive": row[positive], "negative": negatives}


def _fill(pending, keys, batch_size: int, batch: list, seen: set) -> list:
    """Takes pairs from `pending` (an iterator of indices, in order) into `batch` while it has
    room, passing over those sharing a text with it; returns the passed-over ones, in order."""
    passed = []
    for index in pending:
        if keys[index].isdisjoint(seen):
            batch.append(index)
            seen.update(keys[index])
            if len(batch) == batch_size:
                break
        else:
            passed.append(index)
    return passed


def batches(pairs: Pairs, batch_size: int, seed: int, drop_last: bool = True) -> Packing:
    """One epoch's batches: a shuffle by `seed` (numpy's PCG64: the same batches for the same
    seed anywhere; give each epoch its own seed), then packed so that no two texts of one
    batch share a `text_key`; see the module's docstring."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    keys = [frozenset(text_key(text) for text in pairs.texts(i)) for i in range(len(pairs))]
    stream = iter(np.random.default_rng(seed).permutation(len(pairs)).tolist())
    deferred, kept, dropped, passed_over = [], [], [], 0
    while True:
        batch, seen = [], set()
        # the deferred pairs first: they came earlier in the shuffled order
        waiting = iter(deferred)
        passed = _fill(waiting, keys, batch_size, batch, seen)
        passed += _fill(stream, keys, batch_size, batch, seen) if len(batch) < batch_size else []
        deferred = passed + list(waiting)  # what the full batch left untried stays in order
        passed_over += len(passed)
        if not batch:
            break
        if len(batch) == batch_size or not drop_last:
            kept.append(tuple(batch))
        else:  # the stream is spent and the deferred pairs cannot fill it
            dropped.extend(batch)
    return Packing(tuple(kept), tuple(dropped), passed_over)
