"""Global shuffle and shard writing (the commit step is in beam_pipelines/commit.py).

Beam's file sinks cannot put a per-shard record count in the file name (our naming,
kept for the legacy HF trainer's regex) nor shuffle inside a shard, so this module writes
shards itself:

1. `AssignShards`: each row gets a 64-bit key hashed from its content and the seed; the
   key picks the shard (`shard_of`: shards are equal ranges of the key space) and the order
   inside it. Rows of one document therefore scatter over all shards, and a rerun on the
   same data writes the same files.
2. `WriteShard`: after a GroupByKey on (split, shard), sorts the rows by key (equal keys by
   their ids: `row_order`) and streams one TFRecord file
   `{split}-{run_id}-{shard:05d}-{count}.tfrecord` in chunks of rows, with its byte size and
   crc32c for the manifest (`write_shard`). A shard no row falls in is not written (no
   reader is handed an empty shard), so indices may skip numbers.

That is the path on Dataflow. Beam's local runners hold a GroupByKey in memory, so local runs
shuffle on disk instead (beam_pipelines/local/shuffle.py): the same keys, the same ranges,
the same `write_shard`, byte-identical files.
"""

from __future__ import annotations

import math

import apache_beam as beam
import google_crc32c
import numpy as np

from beam_pipelines import hashing, progress
from beam_pipelines.accounting import emit_stat
from common import fs, prepared_dir, schema, shards, tfrecord


def num_shards_for(count: int, shard_size: int, fixed: int = 0) -> int:
    if count == 0:
        return 0
    return min(fixed, count) if fixed else max(1, math.ceil(count / shard_size))


def key_weights(seed: int, max_length: int) -> np.ndarray:
    """Odd 64-bit weights, one per position, from the seed."""
    return hashing.odd_multipliers(np.random.default_rng(seed), max_length)


def row_keys(ids: np.ndarray, lengths: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """A 64-bit pseudo-random key per row, a pure function of (row, seed's weights)."""
    with np.errstate(over="ignore"):
        h = (ids.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
        return hashing.mix64(h ^ lengths.astype(np.uint64))


def shard_of(keys: np.ndarray, n: int) -> np.ndarray:
    """The shard of each key: shard s holds the keys whose top 32 bits h have
    floor(h * n / 2**32) == s, a contiguous range of the key space (see `key_range`), so a
    key-sorted run of rows can be cut into shards without reading it all."""
    return ((keys >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32)


def key_range(shard: int, n: int) -> tuple[int, int]:
    """[low, high) of the keys `shard_of` puts in `shard` of `n` (high may be 2**64)."""

    def bound(s):
        return -(-s * 2**32 // n) << 32  # ceil(s * 2**32 / n) in the top 32 bits

    return bound(shard), bound(shard + 1)


SHUFFLE_BYTES = "run.shuffle_bytes"  # the rows' payload through the shuffle, in the manifest


def shuffle_stat(keys, ids, lengths) -> tuple[str, int]:
    """(SHUFFLE_BYTES, bytes of the rows' arrays): what both shuffle paths move per row."""
    return SHUFFLE_BYTES, int(keys.nbytes + ids.nbytes + lengths.nbytes)


class AssignShards(beam.DoFn):
    """(split, ids, lengths) -> ((split, shard), (keys, ids, lengths)) per shard touched
    (main), and the bytes of rows sent to the shuffle (STATS: SHUFFLE_BYTES).

    Args:
        seed: the shuffle's seed (a row's key, hence its shard and place, derive from it).
        max_length: tokens per row.
        shard_size: rows per shard, when `fixed_shards` is 0.
        fixed_shards: shards per split (`--num_shards`), or 0.
    """

    def __init__(self, seed: int, max_length: int, shard_size: int, fixed_shards: int):
        self.seed, self.max_length = seed, max_length
        self.shard_size, self.fixed_shards = shard_size, fixed_shards

    def setup(self):
        self.weights = key_weights(self.seed, self.max_length)

    def process(self, block, counts: dict):
        split, ids, lengths = block
        n = num_shards_for(counts[split], self.shard_size, self.fixed_shards)
        keys = row_keys(ids, lengths, self.weights)
        shards = shard_of(keys, n)
        for shard in np.unique(shards):
            take = shards == shard
            yield (split, int(shard)), (keys[take], ids[take], lengths[take])
        yield emit_stat(*shuffle_stat(keys, ids, lengths))


def encode_rows(ids: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    """Serialized Examples for rows of token ids (attention mask from the lengths)."""
    mask = (np.arange(ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64)
    return schema.encode_examples(ids, mask)


def row_order(keys: np.ndarray, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The order of a shard's rows: by key, rows with equal keys by (length, ids). A total
    order, so the bytes do not depend on the order the rows arrive in (the GroupByKey's
    parts, the local runs' names), even when two different rows share a key."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    same = ordered[1:] == ordered[:-1]
    tied = np.zeros(len(keys), bool)
    tied[1:] |= same
    tied[:-1] |= same
    if tied.any():  # equal keys are rare: sort only their rows, each group stays in place
        rows = order[tied]
        order[tied] = rows[np.lexsort((*ids[rows].T[::-1], lengths[rows], keys[rows]))]
    return order


def write_shard(
    output_dir: str,
    run_id: str,
    split: str,
    shard: int,
    keys: np.ndarray,
    ids: np.ndarray,
    lengths: np.ndarray,
) -> dict:
    """Writes one shard's rows, in key order, straight to its final, run-unique name in the
    split folder (one atomic write; a retried bundle writes the same bytes to the same
    name); returns its entry for the manifest. No manifest lists it until the commit step."""
    order = row_order(keys, ids, lengths)
    name = shards.shard_name(split, shard, len(ids), run_id)
    checksum, size = google_crc32c.Checksum(), 0

    def counted(chunks):
        nonlocal size
        for chunk in chunks:
            checksum.update(chunk)
            size += len(chunk)
            yield chunk

    fs.upload_stream(
        prepared_dir.shard_path(output_dir, split, name),
        counted(framed_chunks(ids, lengths, order)),
    )
    return {
        "split": split,
        "shard": shard,
        "name": name,
        "num_examples": len(ids),
        "num_tokens": int(lengths.sum()),
        "num_bytes": size,
        "crc32c": checksum.digest().hex(),
    }


def concat_rows(parts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[(keys, ids, lengths), ...] -> (keys, ids, lengths), each concatenated."""
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


class WriteShard(beam.DoFn):
    """((split, shard), parts) -> one shuffled TFRecord file (see `write_shard`).
    Subclasses gather a shard's rows otherwise by overriding `rows`.

    Args:
        output_dir: the prepared folder the split folders go in.
        run_id: the run's id, in every shard's name.
        progress_dir: where the progress tallies go (local runs), or None.
    """

    def __init__(self, output_dir: str, run_id: str, progress_dir: str | None = None):
        self.output_dir, self.run_id, self.progress_dir = output_dir, run_id, progress_dir

    def setup(self):
        self.tally = progress.Tally(self.progress_dir)

    def rows(self, element) -> tuple:
        """element -> (split, shard, (keys, ids, lengths))."""
        (split, shard), parts = element
        return split, shard, concat_rows(list(parts))

    def process(self, element):
        split, shard, (keys, ids, lengths) = self.rows(element)
        if not len(ids):  # a key range no row fell in: no file, so no reader gets it
            return
        yield write_shard(self.output_dir, self.run_id, split, shard, keys, ids, lengths)
        self.tally.add(shards=1)
        self.tally.flush()


def framed_chunks(
    ids: np.ndarray, lengths: np.ndarray, order: np.ndarray, rows_per_chunk: int = 4096
):
    """The shard's TFRecord bytes, rows in `order`, a few MB at a time: encoding a whole
    150 MB shard at once held ~7 copies of it (int64 mask, records, framing, joins)."""
    for start in range(0, len(order), rows_per_chunk):
        take = order[start : start + rows_per_chunk]
        yield tfrecord.frame(encode_rows(ids[take], lengths[take]))
