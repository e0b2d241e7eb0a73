"""The hashing helpers prepare's steps share. Each is stable across processes, machines and
Python versions (no `hash()`, whose strings are salted per process): workers agree and reruns
give the same keys, shards and dedup decisions.

What is hashed stays with its step: a row's shard key (`shard_writer.row_keys`), a text's
exact-dedup key (`dedup.exact_key`), MinHash shingles and band keys (`minhash`), the n-grams
decontamination looks up (`ngram_hashes`).
"""

from __future__ import annotations

import hashlib

import numpy as np


def digest(data: bytes, size: int) -> bytes:
    """A `size`-byte BLAKE2b digest of `data`: keys whose collisions are negligible."""
    return hashlib.blake2b(data, digest_size=size).digest()


def position_hash(position: tuple) -> int:
    """A document's place (`documents.position`, plain ints) as a 64-bit int. Two places
    collide with odds ~n^2 / 2^64; the run's accounting would then refuse the commit, not
    drop text silently."""
    return int.from_bytes(digest(repr(position).encode(), 8), "big")


def unit_draw(position: tuple, seed: int) -> float:
    """A document's place (`documents.position`) and a seed as a number in [0, 1): the
    mixture's per-document draw, the same on every rerun and worker (no random state)."""
    return int.from_bytes(digest(repr((seed, position)).encode(), 8), "big") / 2**64


def key_halves(key: bytes) -> tuple[int, int]:
    """A 16-byte key as (hi, lo) 64-bit ints: sorting by (hi, lo) sorts the key's bytes."""
    return int.from_bytes(key[:8], "big"), int.from_bytes(key[8:], "big")


def key_bytes(hi: int, lo: int) -> bytes:
    """The 16-byte key `key_halves` split."""
    return int(hi).to_bytes(8, "big") + int(lo).to_bytes(8, "big")


def mix64(h: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads the bits of a weak hash over all 64 bits."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def odd_multipliers(rng: np.random.Generator, size: int) -> np.ndarray:
    """`size` odd 64-bit multipliers drawn from `rng` (an odd one is a bijection mod 2**64,
    so multiply-shift and weighted-sum hashes lose no bits to it)."""
    return rng.integers(1, 2**63, size=size, dtype=np.uint64) | np.uint64(1)


_NGRAM_PRIME = np.uint64(0x100000001B3)  # FNV-1's 64-bit prime: odd, so a bijection mod 2**64


def unit_hashes(units: list[str], cache: dict | None = None) -> np.ndarray:
    """64-bit BLAKE2b hashes of word units, one per unit (uint64). `cache` ({unit: digest},
    the caller bounds it): words repeat, and a lookup costs a fifth of a digest."""
    if cache is None:
        joined = b"".join(digest(u.encode("utf-8", "surrogatepass"), 8) for u in units)
    else:
        found = []
        for unit in units:
            if (known := cache.get(unit)) is None:
                known = cache[unit] = digest(unit.encode("utf-8", "surrogatepass"), 8)
            found.append(known)
        joined = b"".join(found)
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64)


def ngram_hashes(hashes: np.ndarray, n: int) -> np.ndarray:
    """64-bit hashes of every `n` consecutive unit hashes (`unit_hashes`; none when fewer):
    a polynomial of the n values started from n (so an n-gram and a longer one never share
    a hash but by chance), spread by `mix64`. Two different n-grams collide with odds 2**-64."""
    k = len(hashes) - n + 1
    if k <= 0:
        return np.zeros(0, dtype=np.uint64)
    h = np.full(k, n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            h = h * _NGRAM_PRIME + hashes[j : j + k]
    return mix64(h)
