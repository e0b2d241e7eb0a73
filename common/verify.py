"""Checks a prepared output completely: every shard's bytes, checksum, records and values.

    python -m common.verify OUT            # every split folder of OUT (or OUT is one split)

Readers check only what is cheap on open (the manifest, and each shard's size from one
listing); this reads every byte: the whole-file crc32c the manifest records, each record's
TFRecord framing checksums, the number of records, and every record's values parsed against
the manifest (both features exactly `max_length` long, token ids inside the vocabulary,
attention masks of 0 and 1 that add up to the shard's `num_tokens`). It also checks the
manifest's own entries (each shard listed once, each format-2 entry with its checksum and
size, token totals that add up) and that the splits of OUT are one prepare run's (a rerun
cut short between two manifest writes leaves new splits beside old ones). Exit status 0
when everything matches, 1 naming the first bad file or the mixed runs, 2 when OUT holds no
committed split.
"""

from __future__ import annotations

import argparse
import io
import sys

import google_crc32c
import numpy as np

from common import fs, manifest, prepared_dir, schema, tfrecord
from common.errors import UserError, run_cli


class DamagedShardError(Exception):
    """A shard that does not match its manifest entry."""


_PARSE_BATCH = 4096  # records decoded per vectorised pass


def shard_records(data: bytes, path: str) -> list[bytes]:
    """The records of TFRecord bytes, each framing checksum checked."""
    found = []
    try:
        for record in tfrecord.records(io.BytesIO(data)):
            found.append(record)
    except tfrecord.RecordError as err:
        raise DamagedShardError(f"{path}: record {len(found) + 1} is corrupt ({err})") from None
    return found


def count_records(data: bytes, path: str) -> int:
    """Records in TFRecord bytes, each framing checksum checked."""
    return len(shard_records(data, path))


def check_entries(found: manifest.Manifest, split_dir: str) -> None:
    """The manifest's own entries: each shard listed once (twice would be read twice), each
    format-2 entry with the checksum and size it was written with (an empty one would skip
    the check), and per-shard token counts that add up to the total."""
    where = prepared_dir.manifest_path(split_dir)
    names = [s.name for s in found.shards]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DamagedShardError(f"{where} lists {twice[0]} more than once")
    if found.format_version != manifest.LEGACY_MARKED_VERSION:
        for shard in found.shards:
            if len(shard.crc32c) != 8 or shard.num_bytes < 0:
                raise DamagedShardError(
                    f"{where}: the entry of {shard.name} has no crc32c or "
                    f"size (crc32c {shard.crc32c!r}, {shard.num_bytes} "
                    "bytes); every format-2 or 3 entry records both"
                )
    total = sum(s.num_tokens for s in found.shards)
    if total != found.num_tokens:
        raise DamagedShardError(
            f"{where}: shards hold {total} tokens but the manifest says {found.num_tokens}"
        )


def _vocab_size(found: manifest.Manifest, split_dir: str) -> int:
    size = found.tokenizer.get("vocab_size")
    if not isinstance(size, int) or size < 1:
        raise DamagedShardError(
            f"{prepared_dir.manifest_path(split_dir)} records no "
            "vocabulary size to check the token ids against"
        )
    return size


def check_values(
    records: list, path: str, shard: manifest.Shard, max_length: int, vocab_size: int
) -> None:
    """Every record parsed as the trainer parses it, its values checked against the
    manifest: ids in [0, vocab_size), masks of 0 and 1 summing to the shard's num_tokens."""
    tokens = 0
    for first in range(0, len(records), _PARSE_BATCH):
        try:
            ids, mask = schema.decode_examples(records[first : first + _PARSE_BATCH], max_length)
        except schema.RecordSchemaError as err:
            raise DamagedShardError(
                f"{path}: record {first + err.index + 1} {err} (the "
                f"manifest's max_length is {max_length})"
            ) from None
        bad = np.flatnonzero(
            ((ids < 0) | (ids >= vocab_size)).any(axis=1) | ((mask != 0) & (mask != 1)).any(axis=1)
        )
        if bad.size:
            row = int(bad[0])
            raise DamagedShardError(
                f"{path}: record {first + row + 1} holds token ids {int(ids[row].min())}.."
                f"{int(ids[row].max())} (vocabulary {vocab_size}) and attention mask values "
                f"{sorted(set(mask[row].tolist()))} (0 and 1 only)"
            )
        tokens += int(mask.sum())
    if tokens != shard.num_tokens:
        raise DamagedShardError(f"{path}: {tokens} tokens, the manifest says {shard.num_tokens}")


def verify_split(split_dir: str) -> manifest.Manifest:
    """Raises ManifestError or DamagedShardError for the first problem found."""
    found = manifest.read_manifest(split_dir)  # sizes and presence
    check_entries(found, split_dir)
    vocab_size = _vocab_size(found, split_dir)
    for shard, path in zip(found.shards, found.shard_paths(split_dir)):
        data = fs.read_bytes(path)
        if shard.crc32c and f"{google_crc32c.value(data):08x}" != shard.crc32c:
            raise DamagedShardError(
                f"{path}: crc32c {google_crc32c.value(data):08x} does "
                f"not match the manifest's {shard.crc32c}"
            )
        records = shard_records(data, path)
        if len(records) != shard.num_examples:
            raise DamagedShardError(
                f"{path}: {len(records)} records, the manifest says {shard.num_examples}"
            )
        check_values(records, path, shard, found.max_length, vocab_size)
    return found


def split_dirs(output_dir: str) -> list[str]:
    """OUT itself if it is a split folder, else its sub-folders that hold a manifest."""
    output_dir = output_dir.rstrip("/")
    if fs.exists(prepared_dir.manifest_path(output_dir)):
        return [output_dir]
    return prepared_dir.committed_split_dirs(output_dir)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", help="prepared output (local or gs://) or one split")
    args = parser.parse_args(argv)

    def body():
        dirs = split_dirs(args.output_dir)
        if not dirs:
            raise UserError(
                f"{args.output_dir} holds no committed split (no {prepared_dir.MANIFEST})."
            )
        run_ids = {}
        for split_dir in dirs:
            try:
                found = verify_split(split_dir)
            except (DamagedShardError, manifest.ManifestError) as err:
                print(f"BAD: {err}", file=sys.stderr)
                return 1
            run_ids[split_dir] = found.run_id
            print(
                f"ok: {split_dir}: {len(found.shards)} shard(s), {found.num_examples:,} "
                f"records, run {found.run_id or '?'}"
            )
        mixed = manifest.mixed_runs(run_ids)
        if mixed:
            print(f"BAD: {mixed}", file=sys.stderr)
            return 1

    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
