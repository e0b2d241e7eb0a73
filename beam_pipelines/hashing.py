"""The hashing helpers prepare's steps share. Each is stable across processes, machines and
Python versions (no `hash()`, whose strings are salted per process): workers agree and reruns
give the same keys, shards and dedup decisions.

What is hashed stays with its step: a row's shard key (`shard_writer.row_keys`), a text's
exact-dedup key (`dedup.exact_key`), MinHash shingles and band keys (`minhash`).
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
