"""A preflight estimate of what a local prepare needs (memory, and temporary disk for the
shuffle), and a warning, with the numbers, when it will not fit.

On the local runner rows are shuffled through files (beam_pipelines/local/shuffle.py) and
exact copies are found from keys sorted on disk (local/exact_dedup.py), so peak memory is a
constant (sorted runs, one key range and one shard at a time) plus ~120 bytes per document
(the kept documents' place hashes and Beam's copies of them; measured with 250 k and 1 M
documents of 97 bytes). Near dedup goes the same way (local/near_dedup.py: band records and
signatures in sorted runs on disk, a third read of the input), adding ~36 bytes per document
it removes, and ~1 KB per document of temporary disk. The shuffle's files take ~2 bytes per
token (4 above a 65,536 vocabulary) in the temporary folder.
A run that would not fit is announced before it starts rather than killed an hour in.

Example:
    >>> notice = memory_check.warning(tasks, vocab_size=32000, near=False)
    >>> print(notice or "fits")
"""

from __future__ import annotations

import shutil
import tempfile

from beam_pipelines import sources
from common import fs

BASE_BYTES = 800e6  # launcher, Beam, tokenizer, one sorted run and one shard being written
BYTES_PER_DOCUMENT = (
    120  # the exact dedup's per-document state (kept places and splits, 9 bytes each)
)
NEAR_DISK_BYTES_PER_DOCUMENT = 1008  # --dedup near: 14 band records of 40 bytes, a signature
TEXT_BYTES_PER_TOKEN = 3.5  # conservative: 3.9 with the demo's 3k unigram, more with larger
TEXT_BYTES_PER_DOCUMENT = 1000  # conservative for counting documents (web pages: ~3,000)
ROW_BYTES = 12  # a row's shuffle key and length on disk, besides its ids
COMPRESSION_RATIO = 4  # a compressed file counts as 4x its size of text
FIT = 0.8  # warn above this share of what is available


def input_text_bytes(tasks) -> int | None:
    """Bytes of text the file tasks will read (None for Hugging Face datasets: unknown)."""
    total, sizes = 0, {}
    for task in tasks:
        if task[0] != "file":
            return None
        _, path, _, start, end, _ = task
        if end is None:
            if path not in sizes:
                sizes[path] = fs.size(path)
            end = sizes[path]
        factor = COMPRESSION_RATIO if path.lower().endswith(sources.COMPRESSED_SUFFIXES) else 1
        total += (end - start) * factor
    return total


def _proc_kb(path: str, field: str) -> int | None:
    """A `Field:   N kB` line of a /proc file, in bytes (Linux); None where unknown."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_bytes() -> float | None:
    """MemAvailable (Linux); None where unknown."""
    return _proc_kb("/proc/meminfo", "MemAvailable")


def peak_rss_bytes() -> int:
    """This process's peak resident memory. VmHWM (Linux) belongs to the program now running;
    getrusage's ru_maxrss also keeps the peak of the process it was forked from before exec,
    so a child of a large parent would report the parent's size."""
    peak = _proc_kb("/proc/self/status", "VmHWM")
    if peak is None:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return peak


def free_disk_bytes() -> float:
    return shutil.disk_usage(tempfile.gettempdir()).free


def estimate_peak_bytes(text_bytes: float) -> float:
    return BASE_BYTES + BYTES_PER_DOCUMENT * text_bytes / TEXT_BYTES_PER_DOCUMENT


def estimate_disk_bytes(
    text_bytes: float, max_length: int, vocab_size: int, near: bool = False
) -> float:
    tokens = text_bytes / TEXT_BYTES_PER_TOKEN
    near_runs = NEAR_DISK_BYTES_PER_DOCUMENT * text_bytes / TEXT_BYTES_PER_DOCUMENT
    return (
        tokens * (2 if vocab_size <= 1 << 16 else 4)
        + tokens / max_length * ROW_BYTES
        + (near_runs if near else 0)
    )


def warning(
    tasks,
    max_length: int,
    vocab_size: int,
    near: bool = False,
    available: float | None = None,
    free_disk: float | None = None,
) -> str | None:
    """The warning to print before a local run, or None when it should fit (or is unknown)."""
    text_bytes = input_text_bytes(tasks)
    if not text_bytes:
        return None
    available = available_bytes() if available is None else available
    free_disk = free_disk_bytes() if free_disk is None else free_disk
    peak, disk = (
        estimate_peak_bytes(text_bytes),
        estimate_disk_bytes(text_bytes, max_length, vocab_size, near),
    )
    problems = []
    if available and peak > FIT * available:
        problems.append(
            f"~{peak / 1e9:.1f} GB of memory and {available / 1e9:.1f} GB is "
            f"available (~{BYTES_PER_DOCUMENT} bytes per document)"
        )
    if disk > FIT * free_disk:
        what = "the shuffle and near dedup" if near else "the shuffle"
        problems.append(
            f"~{disk / 1e9:.1f} GB of temporary disk for {what} and "
            f"{free_disk / 1e9:.1f} GB is free in {tempfile.gettempdir()} (set "
            "TMPDIR to a larger disk)"
        )
    if not problems:
        return None
    return (
        f"warning: this local prepare of {text_bytes / 1e6:,.0f} MB of text may need "
        + " and ".join(problems)
        + ". Run it on Dataflow (`make prepare`, --runner "
        "DataflowRunner), or prepare a part of the input. Going on."
    )
