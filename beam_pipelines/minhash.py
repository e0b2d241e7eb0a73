"""MinHash signatures and LSH banding for near-duplicate detection: pure functions (numpy).

A document is the set of its `ngram`-grams (shingles) of word units of the normalised text
(`units_of`: `common/word_units.py` over `dedup.normalise`): words in scripts written with
spaces, one character (cluster) each in Chinese, Japanese, Thai and the other scripts written
without them, so a Chinese shingle is 5 characters where an English one is 5 words. (Split at
spaces, a whole Chinese sentence was one word: 1 % of its characters changed left almost no
shingle in common.) Text without such characters gives `str.split()`, the shingles it always
had. A document shorter than `ngram` units is one shingle of all its units. One `ngram` serves
every script: changing 1 % of the units costs the same share of shingles whatever a unit is,
and 5 characters are specific enough that unrelated documents do not meet (docs/languages.md,
"Near dedup", has recall and false positives per language from benchmarks/bench_near_dedup.py). Two
documents' Jaccard similarity J is the share of shingles they have in common; the share of
equal MinHash values estimates it (standard error sqrt(J(1-J)/num_perm): 0.028 at J=0.9
with 112 permutations).

Banding: the signature is cut into `bands` bands of `rows` values; two documents become
candidates when all rows of some band agree, which happens with probability
1 - (1 - J**rows)**bands. With 14 bands of 8 rows (112 permutations) that S-curve is 0.5 at
J ~= (1/14)**(1/8) = 0.72, and a pair is a candidate with probability 0.92 at J=0.8, 0.9996
at J=0.9 and 0.05 at J=0.5. Candidates are then kept only when the full signatures agree on
at least `threshold` (0.8) of their values.

Hashing is stable across processes and machines (crc32 of each word, a fixed mix of n
consecutive word hashes, multiply-shift permutations from a fixed seed): workers agree and
reruns give the same signatures.

Example:
    >>> config = MinHashConfig()
    >>> a = signature("the cat sat on the mat and then it slept all day long".split(), config)
    >>> estimated_jaccard(a, a)
    1.0
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np

from beam_pipelines import hashing
from beam_pipelines.dedup import normalise
from common import word_units
from common.flags import flag

_SEED = 0x5EED_D0C5  # fixed: every worker and rerun draws the same permutations
_CHUNK = 4096  # shingles per step: bounds memory to num_perm * _CHUNK * 8 bytes


@dataclasses.dataclass(frozen=True)
class MinHashConfig:
    """The settings of `--dedup near` (each one a prepare flag)."""

    near_ngram: int = flag(
        "near dedup: word units per shingle (a word, or one character of "
        "Chinese, Japanese, Thai...: common/word_units.py)",
        5,
        minimum=1,
    )
    near_bands: int = flag("near dedup: LSH bands (permutations = bands x rows)", 14, minimum=1)
    near_rows: int = flag("near dedup: signature values per band", 8, minimum=1)
    near_threshold: float = flag(
        "near dedup: estimated Jaccard at which a later document is "
        "a near duplicate of an earlier one",
        0.8,
        minimum=0,
        maximum=1,
    )
    near_max_bucket: int = flag(
        "near dedup: documents compared per LSH bucket (the first "
        "ones in input order); larger buckets are counted",
        100,
        minimum=2,
    )

    @property
    def num_perm(self) -> int:
        return self.near_bands * self.near_rows


def units_of(text: str) -> list[str]:
    """The word units a document's shingles are made of (see the module docstring)."""
    return word_units.units(normalise(text))


def shingle_hashes(words: list[str], ngram: int) -> np.ndarray:
    """32-bit hashes (in uint64) of the word n-grams, one per position."""
    w = np.fromiter(
        (zlib.crc32(word.encode("utf-8", "surrogatepass")) for word in words),
        dtype=np.uint64,
        count=len(words),
    )
    n = min(ngram, len(w))
    k = len(w) - n + 1
    h = np.zeros(k, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):  # a polynomial hash of n consecutive word hashes
            h = h * np.uint64(0x100000001B3) + w[j : j + k]
    return hashing.mix64(h) >> np.uint64(32)


def _permutations(num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(_SEED)
    a = hashing.odd_multipliers(rng, num_perm)
    b = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64)
    return a[:, None], b[:, None]


_PERMUTATIONS: dict[int, tuple] = {}


def signature(words: list[str], config: MinHashConfig) -> np.ndarray:
    """The MinHash signature (uint32, num_perm values) of a document's words: for each
    multiply-shift hash ((a*x + b) mod 2**64) >> 32, the minimum over the shingles."""
    if config.num_perm not in _PERMUTATIONS:
        _PERMUTATIONS[config.num_perm] = _permutations(config.num_perm)
    a, b = _PERMUTATIONS[config.num_perm]
    x = shingle_hashes(words, config.near_ngram)
    out = np.full(config.num_perm, np.iinfo(np.uint32).max, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for start in range(0, len(x), _CHUNK):
            values = (a * x[None, start : start + _CHUNK] + b) >> np.uint64(32)
            out = np.minimum(out, values.min(axis=1))
    return out.astype(np.uint32)


def band_keys(sig: np.ndarray, config: MinHashConfig) -> list[bytes]:
    """One key per band: the band's index and a 96-bit hash of its rows."""
    rows = config.near_rows
    return [
        band.to_bytes(2, "big") + hashing.digest(sig[band * rows : (band + 1) * rows].tobytes(), 12)
        for band in range(config.near_bands)
    ]


def estimated_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a == b))


def earlier_matches(members: list, threshold: float):
    """Members `(position, signature bytes)` of one bucket -> `(position, earlier position,
    estimated Jaccard)` for each member that matches some earlier member (the earliest such)."""
    members = sorted(members)
    sigs = np.stack([np.frombuffer(sig, dtype=np.uint32) for _, sig in members])
    for i in range(1, len(members)):
        agree = (sigs[:i] == sigs[i]).mean(axis=1)
        hits = np.flatnonzero(agree >= threshold)
        if len(hits):
            yield members[i][0], members[hits[0]][0], float(agree[hits[0]])


def near_duplicates(docs: dict, config: MinHashConfig) -> dict:
    """In one process, what the Beam transform computes: {position: units (`units_of`)} -> {removed
    position: (earlier position, estimated Jaccard)}, each removed document matched to the
    earliest candidate (in input order) that clears the threshold. For tests and small runs."""
    buckets: dict[bytes, list] = {}
    for position, words in docs.items():
        sig = signature(words, config)
        for key in band_keys(sig, config):
            buckets.setdefault(key, []).append((position, sig.tobytes()))
    found: dict = {}
    for members in buckets.values():
        members = sorted(members)[: config.near_max_bucket]
        for position, earlier, jaccard in earlier_matches(members, config.near_threshold):
            if position not in found or earlier < found[position][0]:
                found[position] = (earlier, jaccard)
    return found
