"""Where things live in beam_pipelines/: counts reach the STATS output only through
accounting.py's emitters (so Beam metrics and the accounting go together); the hashing helpers
keep their values (where keyed hashes may live: tests/test_layers.py)."""

import ast
import hashlib
import pathlib

import numpy as np

import beam_pipelines
from beam_pipelines import hashing

PACKAGE = pathlib.Path(beam_pipelines.__file__).parent


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def _name(node) -> str:
    """`a.b.c` for a Name/Attribute chain, else ""."""
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _stats_outputs(tree) -> list[int]:
    """Lines that build a TaggedOutput on STATS or touch a Beam metrics counter."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _name(node.func)
        to_stats = (
            called.endswith("TaggedOutput") and node.args and _name(node.args[0]).endswith("STATS")
        )
        if to_stats or called.endswith("Metrics.counter"):
            found.append(node.lineno)
    return found


def test_counts_reach_stats_only_through_the_accounting():
    offenders = {}
    for path in _modules():
        found = _stats_outputs(ast.parse(path.read_text(), str(path)))
        if found and path.relative_to(PACKAGE).as_posix() != "accounting.py":
            offenders[path.relative_to(PACKAGE).as_posix()] = found
    assert not offenders, f"use accounting.emit_stat(s) instead: {offenders}"
    assert _stats_outputs(ast.parse((PACKAGE / "accounting.py").read_text()))  # sees the real one


def test_hashing_helpers_keep_their_values():
    """Moved, not changed: shard keys, dedup keys and MinHash depend on these bits."""
    # splitmix64 seeded with 0: its first output mixes the golden gamma.
    assert int(hashing.mix64(np.array([0x9E3779B97F4A7C15], np.uint64))[0]) == 0xE220A8397B1DCDAF
    assert hashing.position_hash(("a.jsonl", 0, 3)) == int.from_bytes(
        hashlib.blake2b(b"('a.jsonl', 0, 3)", digest_size=8).digest(), "big"
    )
    assert hashing.key_bytes(*hashing.key_halves(bytes(range(16)))) == bytes(range(16))
    odd = hashing.odd_multipliers(np.random.default_rng(5), 4)
    assert (odd & np.uint64(1)).all() and odd.dtype == np.uint64
