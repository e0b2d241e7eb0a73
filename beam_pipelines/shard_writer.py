"""Global shuffle, shard writing and the commit step (rename, manifest, marker).

Beam's file sinks cannot put a per-shard record count in the file name (our naming,
kept for the seed's regex) nor shuffle inside a shard, so this module writes shards itself:

1. `AssignShards`: each row gets a 64-bit key hashed from its content and the seed; the
   key picks the shard (key % num_shards) and the order inside it. Rows of one document
   therefore scatter over all shards, and a rerun on the same data writes the same files.
2. `WriteShard`: after a GroupByKey on (split, shard), sorts the rows by key and writes
   one TFRecord file into a temporary folder of this run.
3. `Finalize` (one call at the end): removes the previous output, renames the temporary
   files to `{split}-{index:05d}-{count}.tfrecord` (indexes contiguous from 0), writes each
   manifest and then, LAST, the completion markers.
"""

from __future__ import annotations

import math
import uuid

import apache_beam as beam
import numpy as np
from apache_beam.io.tfrecordio import _TFRecordUtil  # TFRecord framing + crc32c

from common import fs, manifest, schema, shards


def num_shards_for(count: int, shard_size: int, fixed: int = 0) -> int:
    if count == 0:
        return 0
    return min(fixed, count) if fixed else max(1, math.ceil(count / shard_size))


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads the bits of a weak hash over all 64 bits."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def key_weights(seed: int, max_length: int) -> np.ndarray:
    """Odd 64-bit weights, one per position, from the seed."""
    return np.random.default_rng(seed).integers(1, 2**63, size=max_length,
                                                dtype=np.uint64) | np.uint64(1)


def row_keys(ids: np.ndarray, lengths: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """A 64-bit pseudo-random key per row, a pure function of (row, seed's weights)."""
    with np.errstate(over="ignore"):
        h = (ids.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
        return _mix(h ^ lengths.astype(np.uint64))


class AssignShards(beam.DoFn):
    """(split, ids, lengths) -> ((split, shard), (keys, ids, lengths)) per shard touched."""

    def __init__(self, seed: int, max_length: int, shard_size: int, fixed_shards: int):
        self.seed, self.max_length = seed, max_length
        self.shard_size, self.fixed_shards = shard_size, fixed_shards

    def setup(self):
        self.weights = key_weights(self.seed, self.max_length)

    def process(self, block, counts: dict):
        split, ids, lengths = block
        n = num_shards_for(counts[split], self.shard_size, self.fixed_shards)
        keys = row_keys(ids, lengths, self.weights)
        shard_of = keys % np.uint64(n)
        for shard in np.unique(shard_of):
            take = shard_of == shard
            yield (split, int(shard)), (keys[take], ids[take], lengths[take])


def encode_rows(ids: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    """Serialized Examples for rows of token ids (attention mask from the lengths)."""
    mask = (np.arange(ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64)
    return schema.encode_examples(ids, mask)


class WriteShard(beam.DoFn):
    """((split, shard), parts) -> one shuffled TFRecord file in the run's temp folder."""

    def __init__(self, temp_dir: str):
        self.temp_dir = temp_dir

    def process(self, element):
        (split, shard), parts = element
        parts = list(parts)
        keys = np.concatenate([p[0] for p in parts])
        order = np.argsort(keys, kind="stable")
        ids = np.concatenate([p[1] for p in parts])[order]
        lengths = np.concatenate([p[2] for p in parts])[order]
        path = fs.join(self.temp_dir, f"{split}-{shard:05d}-{uuid.uuid4().hex}.tfrecord")
        with fs.open_write(path) as f:
            for record in encode_rows(ids, lengths):
                _TFRecordUtil.write_record(f, record)
        yield {"split": split, "shard": shard, "path": path, "num_examples": len(ids),
               "num_tokens": int(lengths.sum())}


class Finalize(beam.DoFn):
    """Commits the run: the only step that touches the final output folders."""

    def __init__(self, output_dir, temp_dir, splits, max_length, tokenizer_info,
                 pipeline_args):
        self.output_dir, self.temp_dir, self.splits = output_dir, temp_dir, splits
        self.max_length, self.tokenizer_info = max_length, tokenizer_info
        self.pipeline_args = pipeline_args

    def process(self, written: list, stats: dict, dead_letter_files: list):
        stats = dict(stats)
        check_accounting(stats, written, self.splits)
        self._commit_dead_letters(dead_letter_files)
        self._remove_stale_splits()
        digests, manifests = {}, {}
        for split in self.splits:
            split_dir = shards.split_dir(self.output_dir, split)
            manifest.remove_marker(split_dir)
            mine = sorted((w for w in written if w["split"] == split), key=lambda w: w["shard"])
            fs.delete(fs.glob(fs.join(split_dir, "*" + shards.SHARD_SUFFIX)))
            entries = [manifest.Shard(shards.shard_name(split, index, w["num_examples"]),
                                      w["num_examples"], w["num_tokens"])
                       for index, w in enumerate(mine)]
            # One call: object stores rename (copy + delete) in batches.
            fs.rename([w["path"] for w in mine], [fs.join(split_dir, e.name) for e in entries])
            manifests[split] = manifest.Manifest(
                split=split, max_length=self.max_length,
                num_examples=sum(s.num_examples for s in entries),
                num_tokens=sum(s.num_tokens for s in entries), shards=entries,
                tokenizer=self.tokenizer_info, pipeline_args=self.pipeline_args,
                accounting=accounting_for(stats, split, self.splits))
            digests[split] = manifest.write_manifest(split_dir, manifests[split])
        for split in self.splits:  # markers last: the output is complete from here on
            manifest.write_marker(shards.split_dir(self.output_dir, split), digests[split])
        fs.delete_tree(self.temp_dir)
        yield {split: m.accounting["split"] for split, m in manifests.items()}

    def _remove_stale_splits(self):
        """Splits an earlier run wrote and this one does not (e.g. a dropped --test_fraction)."""
        for path in fs.glob(fs.join(self.output_dir, "*", manifest.MANIFEST_NAME)):
            split_dir = path[: -len(manifest.MANIFEST_NAME) - 1]
            if fs.basename(split_dir) not in self.splits:
                fs.delete(fs.glob(fs.join(split_dir, "*" + shards.SHARD_SUFFIX)) + [path])

    def _commit_dead_letters(self, files):
        dead_dir = fs.join(self.output_dir, "dead_letter")
        fs.delete(fs.glob(fs.join(dead_dir, "*")))
        fs.rename(files, [fs.join(dead_dir, fs.basename(path)) for path in files])


SPLIT_KEYS = ("documents_tokenized", "documents_empty", "tokens_in", "tokens_dropped",
              "tokens_padded")


def accounting_for(stats: dict, split: str, splits: list) -> dict:
    """The manifest's `accounting`: this split's counts and the run's input totals."""
    own = {key: int(stats.get(f"{split}/{key}", 0)) for key in SPLIT_KEYS}
    own["tokens_written"] = own["tokens_in"] - own["tokens_dropped"]
    own["dropped_fraction"] = own["tokens_dropped"] / own["tokens_in"] if own["tokens_in"] else 0
    run = {key: int(stats.get(key, 0)) for key in ("documents_read", "documents_rejected")}
    for key in ("documents_tokenized", "documents_empty"):
        run[key] = sum(int(stats.get(f"{s}/{key}", 0)) for s in splits)
    return {"split": own, "run": run}


class AccountingError(RuntimeError):
    """The counts do not add up: a bug, never bad input (bad input is dead-lettered)."""


def check_accounting(stats: dict, written: list, splits: list) -> None:
    run = accounting_for(stats, splits[0], splits)["run"] if splits else {}
    documents = run.get("documents_tokenized", 0) + run.get("documents_empty", 0)
    if documents + run.get("documents_rejected", 0) != run.get("documents_read", 0):
        raise AccountingError(f"documents do not add up: {run}")
    unknown = {k.split("/")[0] for k in stats if "/" in k} - set(splits)
    if unknown:
        raise AccountingError(f"documents were assigned to unexpected splits {sorted(unknown)}")
    for split in splits:
        own = accounting_for(stats, split, splits)["split"]
        on_disk = sum(w["num_tokens"] for w in written if w["split"] == split)
        if own["tokens_in"] - own["tokens_dropped"] != on_disk:
            raise AccountingError(f"{split}: {own['tokens_in']} tokens in, "
                                  f"{own['tokens_dropped']} dropped, but {on_disk} written")
