"""The split rule: which split a document goes to when its input names none. Prepare assigns
it; the trainer's fill-mask demo uses it to pick held-out text. One rule for both halves."""

from __future__ import annotations

import hashlib


def hash_split(text: str, validation_fraction: float, test_fraction: float) -> str:
    """Deterministic split of a document by a hash of its text, so reruns agree and exact
    duplicates always land in the same split."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    u = int.from_bytes(digest, "big") / 2.0**64
    if u < validation_fraction:
        return "validation"
    if u < validation_fraction + test_fraction:
        return "test"
    return "train"
