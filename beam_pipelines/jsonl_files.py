"""JSONL side files of a run (dead letters, the removed sample), written whole by one worker.

Beam's `WriteToText` finalizes by renaming its temporary files and checks them through globs
built from the output path: an `--output_dir` holding `[` (a glob character) matched other
names or none, and the first run into `OUT[6]` ended in FinalizeWrite's "src and dst files do
not exist". Here each file is one atomic write (`fs.upload_stream`, names taken literally) under
a name fixed by the run, so a retried step writes the same file again, never a second one.

Example:
    >>> paths = lines | WriteJsonl(prepared_dir.dead_letter_prefix(out, run_id))
"""

from __future__ import annotations

import zlib

import apache_beam as beam

from common import fs, prepared_dir


def shard_path(prefix: str, index: int, count: int) -> str:
    """File `index` of `count`, named as `WriteToText` named its shards."""
    return f"{prefix}-{index:05d}-of-{count:05d}{prepared_dir.JSONL_SUFFIX}"


def write_lines(prefix: str, lines, index: int = 0, count: int = 1) -> str:
    """Writes `lines` (str, no newline) as file `index` of `count`; returns its path."""
    path = shard_path(prefix, index, count)
    fs.upload_stream(path, (line.encode("utf-8") + b"\n" for line in lines))
    return path


class WriteJsonl(beam.PTransform):
    """A PCollection of JSON lines -> `shards` files; yields their paths. A file's lines meet
    on one worker (one key: the line's hash picks it), which streams them into the file; a
    shard with no line is not written, and with no line at all the first file is written
    empty (as `WriteToText` did: a run's manifest always lists its dead-letter file)."""

    def __init__(self, prefix: str, shards: int = 1):
        super().__init__()
        self.prefix, self.shards = prefix, shards

    def expand(self, lines):
        prefix, count = self.prefix, self.shards
        written = (
            lines
            | "ShardKey" >> beam.Map(lambda line: (zlib.crc32(line.encode()) % count, line))
            | "Together" >> beam.GroupByKey()
            | "WriteFile"
            >> beam.MapTuple(lambda index, group: write_lines(prefix, group, index, count))
        )
        empty = (
            lines
            | "Count" >> beam.combiners.Count.Globally()
            | "EmptyFile"
            >> beam.FlatMap(lambda n: [write_lines(prefix, [], 0, count)] if n == 0 else [])
        )
        return (written, empty) | "Paths" >> beam.Flatten()
