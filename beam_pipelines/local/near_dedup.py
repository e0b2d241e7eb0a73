"""Near dedup of local runs (`near_dedup.NearDedup`'s twin), holding neither text nor a
signature per document in memory (Beam's local runners keep whatever crosses a grouping in
memory: the Beam path held ~35 bytes per byte of text there).

1. `SpillBands` (over the exact dedup's survivors): each document's MinHash signature goes
   to a run's signature file, and its band keys, with its place and its row in that file,
   into fixed-size records, written as runs sorted by band key (`.npy` files in the local
   spill folder); the runs' names travel through Beam.
2. `DecideBuckets`: the band-key space is cut into ranges of ~`RANGE_RECORDS` records; for
   each, the runs' slices are merged and sorted by key, then place. Every bucket of two or
   more compares its first `near_max_bucket` members as `minhash.earlier_matches` does
   (their signatures read back through memory maps); over-full buckets are counted. Out
   comes one array per range of (removed place hash, earlier place, estimated Jaccard),
   reduced to the earliest match per removed document (`earliest_matches`): 36 bytes per
   document removed, nothing per document kept.
3. `DropNearMatched` (a third read of the input, once the matches are known): the exact
   dedup's survivors (`reread`, with the splits the first read chose) go on unless their
   place has a match; a matched one becomes a `Removed` record and a count, as in the Beam
   path.

The decisions, counts and records are those of `near_dedup.NearDedup` (Dataflow's path), which
tests/beam_pipelines/local/test_near_dedup.py checks. Disk: ~1 KB a document (14 band
records of 40 bytes and a 448-byte signature at the default 14 x 8), removed with the run.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindows

from beam_pipelines import minhash
from beam_pipelines.accounting import RUN_PREFIX, STATS, emit_stat, emit_stats, removal_key
from beam_pipelines.documents import REMOVED, Document, doc_position, split_of
from beam_pipelines.hashing import position_hash
from beam_pipelines.local.exact_dedup import load_range, range_tasks
from beam_pipelines.near_dedup import near_removed

# A band record: its key (hi: 64 bits of the band's hash; lo: the band's index and the
# hash's last 32 bits), the document's source (an index into the run's sources), place,
# and its row in the run's signature file.
BAND = np.dtype(
    [
        ("hi", "<u8"),
        ("lo", "<u8"),
        ("source", "<u4"),
        ("offset", "<i8"),
        ("line", "<i8"),
        ("row", "<u4"),
    ]
)
# A match: the removed document's place hash, the earlier document's place (source as an
# index into `names`), and their estimated Jaccard.
MATCH = np.dtype(
    [("hash", "<u8"), ("source", "<u4"), ("offset", "<i8"), ("line", "<i8"), ("jaccard", "<f8")]
)
RUN_DOCS = 1 << 15  # documents per sorted run (~33 MB of band records and signatures)
RANGE_RECORDS = 1 << 20  # band records per range decided at once (~40 MB)
NAMES = "names"  # the sorted sources of all runs: what MATCH's source indexes


def split_key(key: bytes) -> tuple[int, int]:
    """A `minhash.band_keys` key (2 bytes band, 12 bytes hash) as (hi, lo) uint64s whose
    order spreads evenly over the key space (hi is hash bits)."""
    return (
        int.from_bytes(key[2:10], "big"),
        int.from_bytes(key[:2], "big") << 32 | int.from_bytes(key[10:14], "big"),
    )


class SpillBands(beam.DoFn):
    """Document -> (run path, band records) per sorted run written to `folder`."""

    def __init__(self, folder, config: minhash.MinHashConfig, run_docs=None):
        self.folder, self.config, self.run_docs = folder, config, run_docs or RUN_DOCS

    def start_bundle(self):
        self._new_run()

    def _new_run(self):
        self.bands = np.zeros(self.run_docs * self.config.near_bands, BAND)
        self.sigs = np.zeros((self.run_docs, self.config.num_perm), np.uint32)
        self.size, self.source_ids = 0, {}

    def process(self, doc: Document):
        if doc.text.strip():  # a blank one passes the third read untouched
            yield from self._add(doc)

    def _add(self, doc: Document):
        sig = minhash.signature(minhash.units_of(doc.text), self.config)
        _, offset, line = doc_position(doc)
        source = self.source_ids.setdefault(doc.source, len(self.source_ids))
        row, n = self.size, self.config.near_bands
        self.sigs[row] = sig
        self.bands[row * n : (row + 1) * n] = [
            (*split_key(key), source, offset, line, row)
            for key in minhash.band_keys(sig, self.config)
        ]
        self.size += 1
        if self.size == self.run_docs:
            yield self._spill()

    def _spill(self) -> tuple[str, int]:
        count = self.size * self.config.near_bands
        bands = np.sort(self.bands[:count], order=["hi", "lo"], kind="stable")
        path = os.path.join(self.folder, f"bands-{uuid.uuid4().hex}")
        np.save(f"{path}.npy", bands)
        np.save(f"{path}.sigs.npy", self.sigs[: self.size])
        with open(f"{path}.sources.json", "w") as f:
            json.dump(sorted(self.source_ids, key=self.source_ids.get), f)
        self._new_run()
        return path, count

    def finish_bundle(self):
        if self.size:
            yield GlobalWindows.windowed_value(self._spill())


class DecideBuckets(beam.DoFn):
    """(range, n, run paths) -> a MATCH array of this range's matches (main), the sorted
    sources (NAMES, from range 0), over-full buckets counted (STATS)."""

    def __init__(self, config: minhash.MinHashConfig):
        self.config = config

    def process(self, task):
        index, n, paths = task
        records, names, runs = load_range(paths, index, n, BAND)
        order = np.lexsort(
            (records["line"], records["offset"], records["source"], records["lo"], records["hi"])
        )  # by key, then input order
        records, runs = records[order], runs[order]
        first = np.ones(len(records), bool)
        first[1:] = (records["hi"][1:] != records["hi"][:-1]) | (
            records["lo"][1:] != records["lo"][:-1]
        )
        starts = np.flatnonzero(first)
        sizes = np.diff(np.append(starts, len(records)))
        yield from self._count_capped(sizes)
        sigs = [np.load(f"{path}.sigs.npy", mmap_mode="r") for path in paths]
        rank = {name: i for i, name in enumerate(names)}
        cap, found = self.config.near_max_bucket, []
        for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):
            members = [
                (
                    (names[int(r["source"])], int(r["offset"]), int(r["line"])),
                    sigs[run][int(r["row"])].tobytes(),
                )
                for r, run in zip(
                    records[start : start + min(size, cap)],
                    runs[start : start + min(size, cap)].tolist(),
                )
            ]
            for position, earlier, jaccard in minhash.earlier_matches(
                members, self.config.near_threshold
            ):
                found.append(
                    (position_hash(position), rank[earlier[0]], earlier[1], earlier[2], jaccard)
                )
        yield np.array(found, MATCH)
        if index == 0:
            yield beam.pvalue.TaggedOutput(NAMES, names)

    def _count_capped(self, sizes):
        over = sizes[sizes > self.config.near_max_bucket]
        if len(over):  # as MatchInBuckets counts: only buckets over the cap
            yield emit_stat(RUN_PREFIX + "near_buckets_capped", len(over))
            yield emit_stat(
                RUN_PREFIX + "near_bucket_members_unchecked",
                int((over - self.config.near_max_bucket).sum()),
            )


def earliest_matches(arrays) -> np.ndarray:
    """MATCH arrays -> one, sorted by removed hash, holding each removed document's earliest
    match (the least earlier place, then Jaccard: `min` of the Beam path's tuples)."""
    matches = np.concatenate([np.zeros(0, MATCH), *arrays])
    matches = matches[
        np.lexsort(
            (
                matches["jaccard"],
                matches["line"],
                matches["offset"],
                matches["source"],
                matches["hash"],
            )
        )
    ]
    first = np.ones(len(matches), bool)
    first[1:] = matches["hash"][1:] != matches["hash"][:-1]
    return matches[first]


class DropNearMatched(beam.DoFn):
    """Third read: Document -> itself if blank or unmatched (main), else a `Removed`
    (REMOVED) and a count (STATS), in the split the read before set (`KeptOnly`)."""

    def start_bundle(self):
        self.stats = Counter()

    def process(self, doc: Document, matches: np.ndarray, names: list):
        if not doc.text.strip():
            yield doc
            return
        place = doc_position(doc)
        h = np.uint64(position_hash(place))
        i = int(np.searchsorted(matches["hash"], h))
        if i == len(matches) or matches["hash"][i] != h:
            yield doc
            return
        m = matches[i]
        earlier = (names[int(m["source"])], int(m["offset"]), int(m["line"]))
        self.stats[removal_key(split_of(doc), "documents_duplicate", "near")] += 1
        yield beam.pvalue.TaggedOutput(
            REMOVED, near_removed(place, earlier, float(m["jaccard"]), doc.text)
        )

    def finish_bundle(self):
        yield from emit_stats(self.stats)


class NearDedupByRereading(beam.PTransform):
    """`near_dedup.NearDedup` for local runners (module docstring). `docs` are the exact
    dedup's survivors; `reread(after)` returns them again, from a read of the input that
    starts once `after` is complete. Returns `(docs, removed, stats)`."""

    def __init__(self, reread, folder, config: minhash.MinHashConfig):
        super().__init__()
        self.reread, self.folder, self.config = reread, folder, config

    def expand(self, docs):
        decided = (
            docs
            | "SpillBands" >> beam.ParDo(SpillBands(self.folder, self.config))
            | "ListBandRuns" >> beam.combiners.ToList()
            | "BandRanges" >> beam.FlatMap(range_tasks, RANGE_RECORDS)
            | "SpreadBandRanges" >> beam.Reshuffle()
            | "DecideBuckets"
            >> beam.ParDo(DecideBuckets(self.config)).with_outputs(NAMES, STATS, main="matches")
        )
        matches = decided.matches | "EarliestMatches" >> beam.CombineGlobally(earliest_matches)
        third = self.reread(matches) | "DropNearMatched" >> beam.ParDo(
            DropNearMatched(),
            matches=beam.pvalue.AsSingleton(matches),
            names=beam.pvalue.AsSingleton(decided[NAMES]),
        ).with_outputs(REMOVED, STATS, main="docs")
        stats = (decided[STATS], third[STATS]) | "NearCounts" >> beam.Flatten()
        return third.docs, third[REMOVED], stats
