"""The global shuffle of local runs, on disk: memory stays flat however large the corpus.

Beam's local runners keep every element that crosses a GroupByKey (and every PCollection
that waits for a side input) in the launching process's memory, so shuffling rows into
shards with a GroupByKey made a local prepare's peak memory grow with the corpus. Here rows
go to disk as they are made and only file names travel through Beam:

1. `SpillRows` (fused with the tokenizer): keys each row as `shard_writer.AssignShards`
   does, and writes runs of up to `run_bytes` of ids, sorted by key, to `.npy` files in a
   local folder; it emits one small (split, path, rows) record per file.
2. `shard_tasks`: once every file is written, the rows per split fix the shard count; one
   task per shard lists the split's files.
3. `WriteSpilledShard`: shards are ranges of the key space (`shard_writer.shard_of`), so each
   file's part of a shard is one contiguous slice, found by binary search in the file's keys
   and read through a memory map; the slices are merged by key and written by
   `shard_writer.write_shard`: the same bytes the GroupByKey path writes, and, as there, no
   file for a shard whose key range holds no row.

Peak memory: one run being sorted per tokenizing worker and one shard per writing worker.
Disk: ~2 bytes per token (4 above a 65,536 vocabulary) in the system's temporary folder
(`TMPDIR`), removed when the run ends. Only for runners whose workers share one machine's
disk; Dataflow shuffles with its own service (the GroupByKey path).
"""

from __future__ import annotations

import os
import uuid
from collections import Counter

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindows

from beam_pipelines import shard_writer
from beam_pipelines.accounting import STATS, emit_stats

PARTS = ("keys", "ids", "lengths")
RUN_BYTES = 64 << 20  # ids buffered per split before a sorted run is written


def save_run(folder: str, split: str, keys, ids, lengths) -> str:
    """Writes rows sorted by key as three .npy files; returns their common path prefix."""
    order = np.argsort(keys, kind="stable")
    path = os.path.join(folder, f"{split}-{uuid.uuid4().hex}")
    for part, array in zip(PARTS, (keys, ids, lengths)):
        np.save(f"{path}.{part}.npy", array[order])
    return path


def key_slice(keys: np.ndarray, low: int, high: int) -> tuple[int, int]:
    """[start, stop) of the sorted uint64 `keys` that lie in [low, high) (high <= 2**64)."""
    start = int(np.searchsorted(keys, np.uint64(low), side="left"))
    stop = len(keys) if high >= 2**64 else int(np.searchsorted(keys, np.uint64(high), side="left"))
    return start, stop


def load_slice(path: str, low: int, high: int) -> tuple[np.ndarray, ...]:
    """The rows of run `path` whose keys lie in [low, high), read through memory maps."""
    start, stop = key_slice(np.load(f"{path}.keys.npy", mmap_mode="r"), low, high)
    return tuple(
        np.array(np.load(f"{path}.{part}.npy", mmap_mode="r")[start:stop]) for part in PARTS
    )


class SpillRows(beam.DoFn):
    """(split, ids, lengths) blocks -> (split, path, rows) per sorted run written (main),
    and the bytes of rows it spilled (STATS: `shard_writer.SHUFFLE_BYTES`)."""

    def __init__(self, folder: str, seed: int, max_length: int, run_bytes: int | None = None):
        self.folder, self.seed, self.max_length = folder, seed, max_length
        self.run_bytes = run_bytes or RUN_BYTES

    def setup(self):
        self.weights = shard_writer.key_weights(self.seed, self.max_length)

    def start_bundle(self):
        self.buffers: dict[str, list] = {}
        self.sizes: dict[str, int] = {}
        self.stats: Counter = Counter()

    def process(self, block):
        split, ids, lengths = block
        keys = shard_writer.row_keys(ids, lengths, self.weights)
        self.buffers.setdefault(split, []).append((keys, ids, lengths))
        self.sizes[split] = self.sizes.get(split, 0) + ids.nbytes
        if self.sizes[split] >= self.run_bytes:
            yield self._spill(split)

    def _spill(self, split: str) -> tuple:
        """Writes the split's buffered rows as one run (counted); (split, path, rows)."""
        self.sizes.pop(split)
        keys, ids, lengths = shard_writer.concat_rows(self.buffers.pop(split))
        key, size = shard_writer.shuffle_stat(keys, ids, lengths)
        self.stats[key] += size
        return split, save_run(self.folder, split, keys, ids, lengths), len(keys)

    def finish_bundle(self):
        for split in list(self.buffers):
            yield GlobalWindows.windowed_value(self._spill(split))
        yield from emit_stats(self.stats)


def shard_tasks(runs: list, shard_size: int, fixed_shards: int):
    """All runs -> (split, shard, num_shards, run paths) per shard to write."""
    by_split: dict[str, list] = {}
    for split, path, rows in runs:
        by_split.setdefault(split, []).append((path, rows))
    for split, found in sorted(by_split.items()):
        n = shard_writer.num_shards_for(sum(rows for _, rows in found), shard_size, fixed_shards)
        paths = sorted(path for path, rows in found if rows)
        for shard in range(n):
            yield split, shard, n, paths


class WriteSpilledShard(shard_writer.WriteShard):
    """(split, shard, num_shards, run paths) -> one shard file: each run's slice of the
    shard's key range, merged by `shard_writer.write_shard`."""

    def rows(self, task) -> tuple:
        split, shard, n, paths = task
        low, high = shard_writer.key_range(shard, n)
        return (
            split,
            shard,
            shard_writer.concat_rows([load_slice(path, low, high) for path in paths]),
        )


class ShuffleOnDisk(beam.PTransform):
    """Block PCollections -> `(written, stats)`: the written shards' manifest entries, as
    `AssignShards` + GroupByKey + `WriteShard` give, through files in `folder` instead of
    memory, and the bytes shuffled.

    Takes several block PCollections rather than their Flatten: a local runner buffers a
    Flatten's output in memory, while a ParDo applied to each input runs fused with the
    step that made the blocks.
    """

    def __init__(
        self,
        folder,
        output_dir,
        run_id,
        seed,
        max_length,
        shard_size,
        fixed_shards,
        progress_dir=None,
    ):
        super().__init__()
        self.folder, self.output_dir, self.run_id = folder, output_dir, run_id
        self.seed, self.max_length = seed, max_length
        self.shard_size, self.fixed_shards = shard_size, fixed_shards
        self.progress_dir = progress_dir

    def expand(self, block_parts):
        spill = SpillRows(self.folder, self.seed, self.max_length)
        spilled = [
            part | f"SpillRows{i}" >> beam.ParDo(spill).with_outputs(STATS, main="runs")
            for i, part in enumerate(block_parts)
        ]
        stats = [s[STATS] for s in spilled] | "ShuffleStats" >> beam.Flatten()
        written = (
            [s.runs for s in spilled]
            | "AllRuns" >> beam.Flatten()
            | "ListRuns" >> beam.combiners.ToList()
            | "ShardTasks" >> beam.FlatMap(shard_tasks, self.shard_size, self.fixed_shards)
            | "SpreadShards" >> beam.Reshuffle()
            | "WriteSpilledShards"
            >> beam.ParDo(WriteSpilledShard(self.output_dir, self.run_id, self.progress_dir))
        )
        return written, stats
