"""Concatenate-and-chunk: token streams in, rows of exactly `max_length` tokens out.

Within a bundle, documents are concatenated per split and cut into full rows; only the
last partial row of each bundle (< max_length tokens) is left over. Those remainders
("tails") of all bundles are concatenated and chunked once more in a single step, so the
whole split drops (or pads) fewer than `max_length` tokens: the HF example drops the tail of
every 1000-document batch instead.

A block is `(split, ids, lengths)`: `ids` [rows, max_length] (uint16 when the vocabulary
fits, see `ids_dtype`, else int32), `lengths` int32 [rows] the number of real tokens per row
(max_length except for a padded last row).
"""

from __future__ import annotations

import numpy as np


def ids_dtype(vocab_size: int):
    """uint16 where every id fits: rows wait in memory for the shard count (a side input)
    and again in the shuffle, so this halves the local runner's peak memory per token."""
    return np.uint16 if vocab_size <= 1 << 16 else np.int32


class Chunker:
    """Accumulates token arrays and hands out full rows; keeps the remainder.

    Args:
        max_length: tokens per row.
        dtype: the rows' integer type.
    """

    def __init__(self, max_length: int, dtype=np.int32):
        self.max_length, self.dtype = max_length, dtype
        self._parts: list[np.ndarray] = []
        self.size = 0

    def add(self, ids: np.ndarray) -> None:
        self._parts.append(ids)
        self.size += len(ids)

    def full_rows(self) -> np.ndarray:
        """Removes and returns as many full rows as there are, [n, max_length]."""
        n = self.size // self.max_length
        flat = np.concatenate(self._parts) if self._parts else np.zeros(0, self.dtype)
        rows, rest = flat[: n * self.max_length], flat[n * self.max_length :]
        self._parts, self.size = ([rest] if len(rest) else []), len(rest)
        return rows.reshape(n, self.max_length).astype(self.dtype, copy=False)

    def remainder(self) -> np.ndarray:
        """Removes and returns what is left (fewer than max_length tokens once full rows
        have been taken)."""
        rest = np.concatenate(self._parts) if self._parts else np.zeros(0, self.dtype)
        self._parts, self.size = [], 0
        return rest.astype(self.dtype, copy=False)


def full_lengths(rows: np.ndarray) -> np.ndarray:
    return np.full(len(rows), rows.shape[1], np.int32)


def chunk_tails(tails: list[np.ndarray], max_length: int, pad_tail: bool, pad_id: int):
    """Chunks the concatenated tails of all bundles of one split.

    Returns `(ids, lengths, dropped)`. Tails are ordered by content first so that a rerun
    on the same data gives the same rows whatever order the bundles finished in.
    """
    # The order key is the int32 bytes whatever the dtype, so rows do not depend on it.
    tails = sorted(
        (t for t in tails if len(t)), key=lambda t: (len(t), t.astype(np.int32).tobytes())
    )
    chunker = Chunker(max_length, tails[0].dtype if tails else np.int32)
    for tail in tails:
        chunker.add(tail)
    rows = chunker.full_rows()
    lengths = full_lengths(rows)
    rest = chunker.remainder()
    dropped = 0
    if len(rest) and pad_tail:
        padded = np.full((1, max_length), pad_id, rows.dtype)
        padded[0, : len(rest)] = rest
        rows = np.concatenate([rows, padded])
        lengths = np.concatenate([lengths, [len(rest)]]).astype(np.int32)
    else:
        dropped = len(rest)
    return rows, lengths, dropped
