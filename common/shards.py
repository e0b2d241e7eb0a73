"""Shard naming: `{output_dir}/{split}/{split}-{index:05d}-{count}.tfrecord`.

The record count in the name keeps the seed trainer's regex `-\\d+-(\\d+)\\.tfrecord`
working on our shards, so a directory can be counted without opening a file.
"""

from __future__ import annotations

import re

from common import fs

SHARD_SUFFIX = ".tfrecord"
SEED_COUNT_RE = re.compile(r"-\d+-(\d+)\.tfrecord$")  # the seed trainer's regex
_SHARD_RE = re.compile(r"^(?P<split>.+)-(?P<index>\d{5,})-(?P<count>\d+)\.tfrecord$")


def split_dir(output_dir: str, split: str) -> str:
    return fs.join(output_dir, split)


def shard_name(split: str, index: int, count: int) -> str:
    return f"{split}-{index:05d}-{count}{SHARD_SUFFIX}"


def shard_path(output_dir: str, split: str, index: int, count: int) -> str:
    return fs.join(split_dir(output_dir, split), shard_name(split, index, count))


def parse_shard_name(name: str) -> tuple[str, int, int] | None:
    """`(split, index, count)` for one of our shard names, else None."""
    match = _SHARD_RE.match(fs.basename(name))
    if not match:
        return None
    return match["split"], int(match["index"]), int(match["count"])


def count_from_name(name: str) -> int | None:
    """The record count as the seed trainer reads it (works for its names and ours)."""
    match = SEED_COUNT_RE.search(fs.basename(name))
    return int(match.group(1)) if match else None
