"""Checks a prepared output completely: every shard's bytes, checksum and record count.

    python -m common.verify OUT            # every split folder of OUT (or OUT is one split)

Readers check only what is cheap on open (the manifest, and each shard's size from one
listing); this reads every byte: the whole-file crc32c the manifest records, each record's
TFRecord framing checksums, and the number of records; and that the splits of OUT are one
prepare run's (a rerun cut short between two manifest writes leaves new splits beside old
ones). Exit status 0 when everything matches, 1 naming the first bad file or the mixed
runs, 2 when OUT holds no committed split.
"""

from __future__ import annotations

import argparse
import io
import sys

import google_crc32c

from common import fs, manifest, prepared_dir, tfrecord
from common.errors import UserError, run_cli


class DamagedShardError(Exception):
    """A shard that does not match its manifest entry."""


def count_records(data: bytes, path: str) -> int:
    """Records in TFRecord bytes, each framing checksum checked."""
    count = 0
    try:
        for _ in tfrecord.records(io.BytesIO(data)):
            count += 1
    except tfrecord.RecordError as err:
        raise DamagedShardError(f"{path}: record {count + 1} is corrupt ({err})") from None
    return count


def verify_split(split_dir: str) -> manifest.Manifest:
    """Raises ManifestError or DamagedShardError for the first problem found."""
    found = manifest.read_manifest(split_dir)  # sizes and presence
    for shard, path in zip(found.shards, found.shard_paths(split_dir)):
        data = fs.read_bytes(path)
        if shard.crc32c and f"{google_crc32c.value(data):08x}" != shard.crc32c:
            raise DamagedShardError(f"{path}: crc32c {google_crc32c.value(data):08x} does "
                                    f"not match the manifest's {shard.crc32c}")
        records = count_records(data, path)
        if records != shard.num_examples:
            raise DamagedShardError(f"{path}: {records} records, the manifest says "
                                    f"{shard.num_examples}")
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
            raise UserError(f"{args.output_dir} holds no committed split "
                            f"(no {prepared_dir.MANIFEST}).")
        run_ids = {}
        for split_dir in dirs:
            try:
                found = verify_split(split_dir)
            except (DamagedShardError, manifest.ManifestError) as err:
                print(f"BAD: {err}", file=sys.stderr)
                return 1
            run_ids[split_dir] = found.run_id
            print(f"ok: {split_dir}: {len(found.shards)} shard(s), {found.num_examples:,} "
                  f"records, run {found.run_id or '?'}")
        mixed = manifest.mixed_runs(run_ids)
        if mixed:
            print(f"BAD: {mixed}", file=sys.stderr)
            return 1
    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
