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

import apache_beam as beam

from common import fs, prepared_dir


def single_file_path(prefix: str) -> str:
    """The one file of a prefix, named as `WriteToText` named a single shard."""
    return f"{prefix}-00000-of-00001{prepared_dir.JSONL_SUFFIX}"


def write_lines(prefix: str, lines) -> str:
    """Writes `lines` (str, no newline) as one JSONL file; returns its path."""
    path = single_file_path(prefix)
    fs.upload_stream(path, (line.encode("utf-8") + b"\n" for line in lines))
    return path


class WriteJsonl(beam.PTransform):
    """A PCollection of JSON lines -> one file; yields its path. All lines meet on one worker
    (one key), which streams them into the file; with no line the file is written empty (as
    `WriteToText` did: a run's manifest always lists its dead-letter file)."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def expand(self, lines):
        written = (
            lines
            | "OneKey" >> beam.Map(lambda line: (0, line))
            | "Together" >> beam.GroupByKey()
            | "WriteFile" >> beam.MapTuple(lambda _, group: write_lines(self.prefix, group))
        )
        empty = (
            lines
            | "Count" >> beam.combiners.Count.Globally()
            | "EmptyFile"
            >> beam.FlatMap(lambda n: [write_lines(self.prefix, [])] if n == 0 else [])
        )
        return (written, empty) | "Paths" >> beam.Flatten()
