"""Statistics: DoFns count into a Counter and emit it once per bundle (`emit_stats`), or emit
one count from `process` (`emit_stat`); either way each count becomes a Beam metric (the
Dataflow UI, progress) and a (name, count) pair on the STATS output that the accounting sums.
These helpers are the only way counts reach STATS, so the metrics and the accounting never
part (tests/beam_pipelines/test_layout.py checks)."""

from __future__ import annotations

from collections import Counter

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_pipelines.accounting import STATS


def _counted(key: str, value: int) -> tuple[str, int]:
    beam.metrics.Metrics.counter("prepare", key).inc(value)
    return key, value


def emit_stat(key: str, value: int) -> beam.pvalue.TaggedOutput:
    """One count, from `process`: a Beam metric and a (key, value) pair on STATS."""
    return beam.pvalue.TaggedOutput(STATS, _counted(key, value))


def emit_stats(stats: Counter):
    """A bundle's counts, from `finish_bundle` (whose outputs must carry their window), as
    Beam metrics and (name, count) pairs on STATS."""
    for key, value in stats.items():
        yield beam.pvalue.TaggedOutput(STATS, GlobalWindows.windowed_value(_counted(key, value)))
