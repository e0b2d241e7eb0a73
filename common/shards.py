"""Shard naming: `{output_dir}/{split}/{split}-{run_id}-{index:05d}-{count}.tfrecord`, and
the run ids those names (and a run's other files: common/prepared_dir.py) carry.

The run id makes every run's files new names (a run never overwrites a file that a committed
manifest lists); the record count at the end keeps the legacy HF example trainer's regex
`-\\d+-(\\d+)\\.tfrecord` working, so a directory can be counted without opening a file.

Example:
    >>> shard_name("train", 3, 1200, "r20261122120000a1b2c3")
    'train-r20261122120000a1b2c3-00003-1200.tfrecord'
    >>> parse_shard_name("train-r20261122120000a1b2c3-00003-1200.tfrecord")
    ('train', 3, 1200)
"""

from __future__ import annotations

import re
import time
import uuid

from common import fs

SHARD_SUFFIX = ".tfrecord"
LEGACY_COUNT_RE = re.compile(r"-\d+-(\d+)\.tfrecord$")  # the legacy HF trainer's regex
_RUN_ID = r"r\d{14}[0-9a-f]{6}"
_SHARD_RE = re.compile(
    rf"^(?P<split>.+?)(?:-(?P<run>{_RUN_ID}))?-(?P<index>\d{{5,}})-"
    r"(?P<count>\d+)\.tfrecord$"
)


def new_run_id() -> str:
    """A time-ordered, unique id for one prepare run, e.g. `r20261122120000a1b2c3`."""
    return "r" + time.strftime("%Y%m%d%H%M%S", time.gmtime()) + uuid.uuid4().hex[:6]


def is_run_id(text: str) -> bool:
    """Whether `text` is a run id of new_run_id() (a lock or a record names one)."""
    return isinstance(text, str) and re.fullmatch(_RUN_ID, text) is not None


def run_id_in(name: str) -> str | None:
    """The run id inside a file name (a run's temporary files: common/prepared_dir.py)."""
    match = re.search(_RUN_ID, name)
    return match[0] if match else None


def shard_name(split: str, index: int, count: int, run_id: str = "") -> str:
    run = f"-{run_id}" if run_id else ""
    return f"{split}{run}-{index:05d}-{count}{SHARD_SUFFIX}"


def parse_shard_name(name: str) -> tuple[str, int, int] | None:
    """`(split, index, count)` for one of our shard names (with or without a run id)."""
    match = _SHARD_RE.match(fs.basename(name))
    if not match:
        return None
    return match["split"], int(match["index"]), int(match["count"])


def is_shard_basename(name: str, split: str | None = None) -> bool:
    """Whether a name from a manifest is one of our shard files' bare names (of `split`):
    anything else (a path, `..`) means the manifest is not ours to act on."""
    if not isinstance(name, str) or fs.basename(name) != name or "\\" in name:
        return False
    parsed = parse_shard_name(name)
    return parsed is not None and (split is None or parsed[0] == split)


def count_from_name(name: str) -> int | None:
    """The record count as the legacy trainer reads it (works for its names and ours)."""
    match = LEGACY_COUNT_RE.search(fs.basename(name))
    return int(match.group(1)) if match else None
