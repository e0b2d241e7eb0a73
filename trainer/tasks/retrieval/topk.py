"""A top-k with one tie rule, the same however the candidates arrive (all at once, or a chunk
of the corpus at a time).

Each (score, document) becomes one uint64 key, the greater the better: its high 32 bits are
the float32 score's bits, remapped so that unsigned order is numeric order; its low 32 bits
are the document's rank among the corpus ids sorted as strings. Equal scores thus rank the
greater id first, as trec_eval does (package docstring). No two documents share a key, so a
row's top k is one set whatever the chunking, and the running top-k is keys alone: 8 bytes a
(query, kept document). Scores are compared as float32 (trec_eval keeps a float too); a NaN
score (a model gone wrong) ranks below every number, and -0.0 equals 0.0.

Example:
    >>> ranks, order = tie_ranks(["d1", "d3", "d2"])       # ranks [0, 2, 1]
    >>> keys = score_keys(np.array([[0.5, 0.5, 0.9]]), ranks)
    >>> ranked(keep_top(empty(1), keys, k=2), order)     # d2 (0.9), then d3 before d1
    (array([[2, 1]]), array([[0.9, 0.5]], dtype=float32))
"""

from __future__ import annotations

import numpy as np

_SIGN = np.uint32(0x80000000)
_LOW = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)


def tie_ranks(doc_ids) -> tuple[np.ndarray, np.ndarray]:
    """(rank of each document's id in sorted order, uint64; the document at each rank)."""
    if len(doc_ids) >= 2**32:
        raise ValueError(f"{len(doc_ids)} documents: a key's low 32 bits hold a document")
    # Python orders str by code point, as strcmp orders UTF-8 bytes: trec_eval's order.
    order = np.array(sorted(range(len(doc_ids)), key=doc_ids.__getitem__), np.int64)
    ranks = np.empty(len(doc_ids), np.uint64)
    ranks[order] = np.arange(len(doc_ids), dtype=np.uint64)
    return ranks, order


def _ordered_bits(scores) -> np.ndarray:
    """float32 bits as uint32 whose unsigned order is the scores' order."""
    scores = np.asarray(scores, np.float32)
    scores = np.where(np.isnan(scores), np.float32(-np.inf), scores) + np.float32(0)  # -0 -> 0
    bits = np.ascontiguousarray(scores).view(np.uint32)
    # Positive floats order as their bits: set the sign bit to put them above the negatives,
    # whose bits order backwards: flip them all.
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def _scores_of(high: np.ndarray) -> np.ndarray:
    bits = np.where(high & _SIGN, high ^ _SIGN, ~high)
    return np.ascontiguousarray(bits, np.uint32).view(np.float32)


def score_keys(scores, ranks: np.ndarray) -> np.ndarray:
    """Keys of a (queries, documents) block of scores; `ranks`: those documents' tie ranks."""
    high = _ordered_bits(scores).astype(np.uint64) << _SHIFT
    return high | ranks[np.newaxis, :]


def empty(rows: int) -> np.ndarray:
    """A running top-k that has seen nothing yet."""
    return np.empty((rows, 0), np.uint64)


def keep_top(running: np.ndarray, candidates: np.ndarray, k: int) -> np.ndarray:
    """The k greatest keys of each row among `running` and `candidates` (unordered)."""
    both = np.concatenate([running, candidates], axis=1)
    if both.shape[1] <= k:
        return both
    kept = np.argpartition(both, both.shape[1] - k, axis=1)[:, -k:]
    return np.take_along_axis(both, kept, axis=1)


def ranked(keys: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(document indices, float32 scores) of each row's keys, best first."""
    keys = np.sort(keys, axis=1)[:, ::-1]
    scores = _scores_of((keys >> _SHIFT).astype(np.uint32))
    return order[(keys & _LOW).astype(np.int64)], scores
