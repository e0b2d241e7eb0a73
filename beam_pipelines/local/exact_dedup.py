"""Exact dedup of local runs, in two passes over the input, holding neither text nor a Python
object per document (Beam's local runners keep whatever crosses a grouping in memory):

1. `SpillPositions` (first read, after the quality filter): each document's 128-bit text key
   (`dedup.exact_key`), place and split (the one `cleaning.CountBySplit` chose) go into
   fixed-size records, written as runs sorted by key to `.npy` files in the local shuffle
   folder; the runs' names travel through Beam. A blank document's place and split go
   straight to the kept ones (it is no copy, and the rereads need its split).
   A run keeps one record per text and split, its first place, with the number of copies
   it stands for: a text in N copies is at most (runs x splits) records in its key range,
   not N (before, one range held all N).
2. `DecideRange`: the key space is cut into ranges of ~`RANGE_RECORDS` records; for each,
   the runs' slices (binary search, memory maps) are merged and sorted by key, then place:
   the first of each key is kept. Out come the kept places' 64-bit hashes and split codes
   (two arrays per range), (key, kept place) for the texts that had copies, and the removed
   copies per split (the records not kept, and the copies each record stands for: each in
   its own place's split, as `dedup.ExactDedup` counts them).
3. `KeepFirstCopies` (second read): a document goes on if its place is among the kept ones
   (a sorted array of hashes and one of split codes, 9 bytes a document), with the split
   recorded there: no text is hashed for its split again (nor by `KeptOnly`, near dedup's
   read). A removed copy becomes a `Removed` record (its key is computed again only for the
   documents not kept). The second read is the raw input, so a document not kept is first
   checked against the quality rules: one the first read's filter dropped never reached the
   dedup, and is no copy even when its normalised text is a kept one's (it was counted and
   sampled under its rule).

The same copies are kept, counted and sampled as by `dedup.ExactDedup` (Dataflow's path),
which tests/beam_pipelines/local/test_shuffle.py checks byte for byte.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import uuid

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindows

from beam_pipelines import progress, quality, shard_writer
from beam_pipelines.accounting import STATS, emit_stat, removal_key
from beam_pipelines.dedup import BLANK, copy_removed, exact_key
from beam_pipelines.documents import EXCERPT_CHARS, REMOVED, Document, doc_position, split_of
from beam_pipelines.hashing import key_bytes, key_halves, position_hash
from beam_pipelines.local import shuffle as local_shuffle

# A document's record: its key's two halves (hi first: sorting by (hi, lo) is sorting the
# key's bytes), its source (an index into the run's sorted list of sources), place, split
# and the number of later copies of its text and split in its run that it stands for.
RECORD = np.dtype(
    [
        ("hi", "<u8"),
        ("lo", "<u8"),
        ("source", "<u4"),
        ("offset", "<i8"),
        ("line", "<i8"),
        ("split", "u1"),
        ("copies", "<u4"),
    ]
)
PLACE = ["source", "offset", "line"]  # with sources sorted by name: the order of places
RUN_RECORDS = 1 << 20  # records per sorted run (~37 MB)
RANGE_RECORDS = 1 << 20  # records per range decided at once
COPIED = "copied"  # (key, kept place) of the texts with removed copies


class SpillPositions(beam.DoFn):
    """Document -> (run path, records) per sorted run of `RECORD`s written to `folder`
    (main); the blank documents' (place hashes, split codes) per bundle (BLANK)."""

    def __init__(self, folder, splits, progress_dir=None, run_records=None):
        self.folder, self.splits = folder, list(splits)
        self.progress_dir = progress_dir
        self.run_records = run_records or RUN_RECORDS

    def setup(self):
        self.tally = progress.Tally(self.progress_dir)
        self.split_codes = {split: i for i, split in enumerate(self.splits)}

    def start_bundle(self):
        self._new_run()
        self.blank = ([], [])  # place hashes, split codes

    def _new_run(self):
        self.records = np.zeros(self.run_records, RECORD)
        self.size, self.source_ids = 0, {}

    def process(self, doc: Document):
        self.tally.add(checked=1)
        code = self.split_codes[split_of(doc)]
        if not doc.text.strip():
            self.blank[0].append(position_hash(doc_position(doc)))
            self.blank[1].append(code)
            return
        key = exact_key(doc.text)
        _, offset, line = doc_position(doc)
        source = self.source_ids.setdefault(doc.source, len(self.source_ids))
        self.records[self.size] = (*key_halves(key), source, offset, line, code, 0)
        self.size += 1
        if self.size == self.run_records:
            yield self._spill()

    def _spill(self) -> tuple[str, int]:
        names = sorted(self.source_ids)
        rank = np.zeros(len(names), np.uint32)
        rank[[self.source_ids[name] for name in names]] = np.arange(len(names))
        records = self.records[: self.size]
        records["source"] = rank[records["source"]]
        records = np.sort(records, order=["hi", "lo", "split", *PLACE])
        first = _starts(records, ["hi", "lo", "split"])
        starts = np.flatnonzero(first)
        records = records[starts]
        records["copies"] = np.diff(np.append(starts, self.size)) - 1
        path = os.path.join(self.folder, f"positions-{uuid.uuid4().hex}")
        np.save(f"{path}.npy", records)
        with open(f"{path}.sources.json", "w") as f:
            json.dump(names, f)
        self._new_run()
        return path, len(records)

    def finish_bundle(self):
        if self.size:
            yield GlobalWindows.windowed_value(self._spill())
        if self.blank[0]:
            yield beam.pvalue.TaggedOutput(
                BLANK,
                GlobalWindows.windowed_value(
                    (np.array(self.blank[0], np.uint64), np.array(self.blank[1], np.uint8))
                ),
            )
        self.tally.flush()


def _starts(records: np.ndarray, fields: list) -> np.ndarray:
    """Of records sorted by `fields` (and more): where each value of `fields` begins."""
    first = np.ones(len(records), bool)
    first[1:] = np.logical_or.reduce([records[f][1:] != records[f][:-1] for f in fields])
    return first


def range_tasks(runs: list, range_records: int | None = None):
    """All runs -> (range, number of ranges, run paths) per key range to decide."""
    total = sum(size for _, size in runs)
    n = max(1, -(-total // (range_records or RANGE_RECORDS)))
    paths = sorted(path for path, _ in runs)
    for index in range(n):
        yield index, n, paths


def load_range(
    paths: list[str], index: int, n: int, dtype=RECORD
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """The records (of `dtype`, keyed by "hi" then "lo") of every run whose key's top 64 bits
    fall in range `index` of `n`, with their sources as indexes into one sorted list of all
    the runs' sources, and for each record the index of its run in `paths`."""
    low, high = shard_writer.key_range(index, n)
    tables = []
    for path in paths:
        with open(f"{path}.sources.json") as f:
            tables.append(json.load(f))
    names = sorted(set().union(*tables))
    rank_of = {name: i for i, name in enumerate(names)}
    parts, runs = [], []
    for run, (path, table) in enumerate(zip(paths, tables)):
        records = np.load(f"{path}.npy", mmap_mode="r")
        start, stop = local_shuffle.key_slice(records["hi"], low, high)
        part = np.array(records[start:stop])
        rank = np.array([rank_of[name] for name in table], np.uint32)
        if len(part):
            part["source"] = rank[part["source"]]
        parts.append(part)
        runs.append(np.full(len(part), run, np.uint32))
    if not parts:
        return np.zeros(0, dtype), names, np.zeros(0, np.uint32)
    return np.concatenate(parts), names, np.concatenate(runs)


class DecideRange(beam.DoFn):
    """(range, n, run paths) -> the kept places' (hashes, split codes), a uint64 and a uint8
    array (main); (key, kept place) per text with copies (COPIED); removed copies per split
    (STATS)."""

    def __init__(self, splits):
        self.splits = list(splits)

    def process(self, task):
        index, n, paths = task
        records, names, _ = load_range(paths, index, n)
        records = records[
            np.lexsort(
                (
                    records["line"],
                    records["offset"],
                    records["source"],
                    records["lo"],
                    records["hi"],
                )
            )
        ]
        first = _starts(records, ["hi", "lo"])
        starts = np.flatnonzero(first)
        # Removed copies per kept text: the records after its first, and every record's own.
        copies = (
            np.add.reduceat(records["copies"].astype(np.int64) + 1, starts) - 1
            if len(records)
            else np.zeros(0, np.int64)
        )
        kept = records[starts]
        places = [(names[int(r["source"])], int(r["offset"]), int(r["line"])) for r in kept]
        yield (
            np.array([position_hash(place) for place in places], np.uint64),
            np.array(kept["split"], np.uint8),
        )
        for r, place in zip(kept[copies > 0], itertools.compress(places, copies > 0)):
            yield beam.pvalue.TaggedOutput(COPIED, (key_bytes(r["hi"], r["lo"]), place))
        removed = np.bincount(
            records["split"], weights=records["copies"] + ~first, minlength=len(self.splits)
        ).astype(np.int64)
        for split, count in zip(self.splits, removed.tolist()):
            if count:
                yield emit_stat(removal_key(split, "documents_duplicate", "exact"), count)


def sorted_union(parts) -> tuple[np.ndarray, np.ndarray]:
    """(place hashes, split codes) pairs -> one pair, sorted by hash, each place once (a
    union of unions is one too: CombineGlobally may apply it to its own output)."""
    parts = list(parts)
    hashes = np.concatenate([np.zeros(0, np.uint64), *(h for h, _ in parts)])
    codes = np.concatenate([np.zeros(0, np.uint8), *(c for _, c in parts)])
    hashes, first = np.unique(hashes, return_index=True)
    return hashes, codes[first]


def kept_split(place: tuple, kept: tuple, splits: list) -> str | None:
    """The split the first read chose for a kept (or blank) place; None if not kept."""
    hashes, codes = kept
    h = np.uint64(position_hash(place))
    i = int(np.searchsorted(hashes, h))
    return splits[codes[i]] if i < len(hashes) and hashes[i] == h else None


def with_split(doc: Document, split: str) -> Document:
    return doc if doc.split == split else dataclasses.replace(doc, split=split)


class KeepFirstCopies(beam.DoFn):
    """Second read: Document -> itself, with the split the first read chose, if blank or the
    kept copy of its text (main), a `Removed` if a removed copy (REMOVED); documents the
    quality filter (`quality_config`, None: none) removed in the first read are dropped
    silently: they were counted and sampled there."""

    def __init__(self, splits, quality_config: quality.QualityConfig | None = None):
        self.splits, self.quality_config = list(splits), quality_config

    def process(self, doc: Document, kept: tuple, copied: dict):
        split = kept_split(doc_position(doc), kept, self.splits)
        # One if-chain, no bare `return`: Beam warns about `return` inside a generator DoFn.
        if split is not None:
            yield with_split(doc, split)
        elif not (self.quality_config and quality.first_failure(doc.text, self.quality_config)):
            # (a document the filter drops was filtered before the dedup: not a copy)
            first = copied.get(exact_key(doc.text))  # only for the documents not kept
            if first is not None:
                yield beam.pvalue.TaggedOutput(
                    REMOVED, copy_removed(doc_position(doc), doc.text[:EXCERPT_CHARS], first)
                )


class KeptOnly(beam.DoFn):
    """A later read (near dedup's): Document -> itself, with the split the first read chose,
    if blank or kept; what the quality filter and exact dedup removed is dropped silently
    (counted and sampled by them)."""

    def __init__(self, splits):
        self.splits = list(splits)

    def process(self, doc: Document, kept: tuple):
        split = kept_split(doc_position(doc), kept, self.splits)
        if split is not None:
            yield with_split(doc, split)


class ExactDedupByRereading(beam.PTransform):
    """`dedup.ExactDedup` for local runners (module docstring). `docs` are the first read's
    documents after the quality filter; `reread(after)` returns the input's documents again,
    read only once `after` is complete (else a local runner fuses both reads and holds the
    second one's text until the first pass ends). `quality_config` is the filter the first
    read went through (None: none). Returns `(docs, removed, stats)`."""

    def __init__(self, reread, folder, splits, progress_dir=None, quality_config=None):
        super().__init__()
        self.quality_config = quality_config
        self.reread, self.folder, self.splits = reread, folder, list(splits)
        self.progress_dir = progress_dir

    def expand(self, docs):
        spilled = docs | "SpillPositions" >> beam.ParDo(
            SpillPositions(self.folder, self.splits, self.progress_dir)
        ).with_outputs(BLANK, main="runs")
        decided = (
            spilled.runs
            | "ListRuns" >> beam.combiners.ToList()
            | "RangeTasks" >> beam.FlatMap(range_tasks)
            | "SpreadRanges" >> beam.Reshuffle()
            | "DecideRange"
            >> beam.ParDo(DecideRange(self.splits)).with_outputs(COPIED, STATS, main="kept")
        )
        kept = (
            (decided.kept, spilled[BLANK])
            | "KeptAndBlank" >> beam.Flatten()
            | "KeptPositions" >> beam.CombineGlobally(sorted_union)
        )
        self.kept = kept  # for `survivors`
        second = self.reread(kept) | "KeepFirstCopies" >> beam.ParDo(
            KeepFirstCopies(self.splits, self.quality_config),
            kept=beam.pvalue.AsSingleton(kept),
            copied=beam.pvalue.AsDict(decided[COPIED]),
        ).with_outputs(REMOVED, main="docs")
        return second.docs, second[REMOVED], decided[STATS]

    def survivors(self, docs):
        """Another read's documents -> those this dedup's output holds (after `expand`)."""
        return docs | "KeptByExactDedup" >> beam.ParDo(
            KeptOnly(self.splits), kept=beam.pvalue.AsSingleton(self.kept)
        )
