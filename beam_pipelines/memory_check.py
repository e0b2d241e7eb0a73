"""A preflight estimate of prepare's peak memory on the local runner, and a warning when it
will not fit.

Beam's in-process runners keep every row of the corpus in memory: once until the rows per
split are counted (the shard count is a side input) and once in the GroupByKey that
shuffles rows into shards. That cannot be streamed on these runners, so the cost per token
is kept small (uint16 ids, shards written in chunks: ~20 bytes per token, measured by
tests/beam_pipelines/test_prepare_memory.py) and a run that would not fit is announced
before it starts, with the numbers, rather than killed by the kernel an hour in.

Example:
    >>> warning = memory_check.warning(tasks, available=8e9)
    >>> print(warning or "fits")
"""

from __future__ import annotations

from beam_pipelines import sources
from common import fs

BASE_BYTES = 400e6  # the launcher, Beam and the tokenizer, before any row
BYTES_PER_TOKEN = 20  # peak memory per token of the corpus (see the module docstring)
TEXT_BYTES_PER_TOKEN = 3.5  # conservative: 3.9 with the demo's 3k unigram, more with larger
COMPRESSION_RATIO = 4  # a compressed file counts as 4x its size of text
FIT = 0.8  # warn above this share of the available memory


def input_text_bytes(tasks) -> int | None:
    """Bytes of text the file tasks will read (None for Hugging Face datasets: unknown)."""
    total, sizes = 0, {}
    for task in tasks:
        if task[0] != "file":
            return None
        _, path, _, start, end = task
        if end is None:
            if path not in sizes:
                sizes[path] = fs.glob_sizes(path).get(path, 0)
            end = sizes[path]
        factor = COMPRESSION_RATIO if path.lower().endswith(sources.COMPRESSED_SUFFIXES) else 1
        total += (end - start) * factor
    return total


def available_bytes() -> float | None:
    """MemAvailable from /proc/meminfo (Linux); None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def estimate_peak_bytes(text_bytes: float) -> float:
    return BASE_BYTES + BYTES_PER_TOKEN * text_bytes / TEXT_BYTES_PER_TOKEN


def warning(tasks, available: float | None = None) -> str | None:
    """The warning to print before a local run, or None when it should fit (or is unknown)."""
    text_bytes = input_text_bytes(tasks)
    available = available_bytes() if available is None else available
    if not text_bytes or not available:
        return None
    peak = estimate_peak_bytes(text_bytes)
    if peak <= FIT * available:
        return None
    return (f"warning: this local prepare may need ~{peak / 1e9:.1f} GB of memory and "
            f"{available / 1e9:.1f} GB is available: {text_bytes / 1e6:,.0f} MB of text is "
            f"~{text_bytes / TEXT_BYTES_PER_TOKEN / 1e6:,.0f} M tokens at ~{BYTES_PER_TOKEN} "
            "bytes each, all held by Beam's local runner until they are written. Run it on "
            "Dataflow (`make prepare`, --runner DataflowRunner), or prepare a part of the "
            "input. Going on.")
