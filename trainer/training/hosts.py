"""How a pod's hosts check that they run the same thing before their first collective: each
gathers a few small integers (a step, digests of what it runs) from every process and compares
them. Hosts that differ would call different collectives (one aborts, another waits for ever),
so each command refuses them here, on every host alike, in its own words.

Example:
    >>> disagreement(None, [20, digest({"seed": 1})]) is None  # one process: nothing to compare
    True
"""

from __future__ import annotations

import hashlib
import json


def digest(value) -> int:
    """28 bits of the SHA-256 of `value` as JSON (small enough for any backend's int32
    gather)."""
    text = json.dumps(value, sort_keys=True, default=str)
    return int(hashlib.sha256(text.encode()).hexdigest()[:7], 16)


def disagreement(gather, values: list[int]) -> list[tuple[int, ...]] | None:
    """Every process's `values` where they differ, else None. `gather` (None: one process)
    returns every process's values."""
    if gather is None:
        return None
    seen = [tuple(int(v) for v in row) for row in gather(list(values))]
    return seen if len(set(seen)) > 1 else None
