"""Per-bundle statistics: every DoFn counts into a Counter and emits it once per bundle, both
as Beam metrics (the Dataflow UI, progress) and as (name, count) pairs on the STATS output
that the accounting sums."""

from __future__ import annotations

from collections import Counter

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_pipelines.accounting import STATS


def emit_stats(stats: Counter):
    """A bundle's counts as Beam metrics and as (name, count) pairs on STATS."""
    for key, value in stats.items():
        beam.metrics.Metrics.counter("prepare", key).inc(value)
        yield beam.pvalue.TaggedOutput(STATS, GlobalWindows.windowed_value((key, value)))
