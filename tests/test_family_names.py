"""The name guard: outside trainer/families/, no benchmark or product module decides by a
family's name. What differs between families is a field of its record (trainer/families/
family.py), so a new family is one folder plus a registry line; a module that compares with
"modernbert" would quietly treat the next family as RoBERTa.

trainer/ has a stricter guard of its own (tests/trainer/families/test_families.py: no
family's name as a string at all); this one also reads benchmarks/, common/ and beam_pipelines/.

A name may still enter where a person or a file gives one (`families.get(name)`, argparse
choices and defaults): those are not comparisons. The few per-family data tables and branches
that are allowed are listed in ALLOWED, each with its reason.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from trainer import families

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCANNED = ("benchmarks", "trainer", "common", "beam_pipelines")
NOT_SCANNED = ROOT / "trainer" / "families"  # the records themselves

# (module, the flagged line, stripped) -> why it may name families.
ALLOWED = {
    ("benchmarks/accel/child.py", "FULL = {"): (
        "the configurations measured per family: a benchmark's choice, not a model fact"
    ),
    ("benchmarks/accel/child.py", "QUICK = {"): "as FULL, for --quick",
    ("benchmarks/accel/theirs.py", 'if family == "modernbert":'): (
        "the PyTorch child has no Keras, so no record: transformers' config of each family, "
        "tested equal to the record's hf_config (tests/trainer/test_bench_accel.py)"
    ),
}


def _names(node) -> list:
    """The string constants of `node` and, for a tuple, list or set, of its elements."""
    parts = [node, *getattr(node, "elts", ())]
    return [p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)]


def name_uses(source: str, names) -> list[int]:
    """Lines that compare with, look up by, key a table by or match on a name in `names`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found = [n for side in (node.left, *node.comparators) for n in _names(side)]
        elif isinstance(node, ast.Subscript):
            found = _names(node.slice)
        elif isinstance(node, ast.Dict):
            found = [n for key in node.keys if key is not None for n in _names(key)]
        elif isinstance(node, ast.MatchValue):
            found = _names(node.value)
        else:
            continue
        if set(found) & set(names):
            lines.append(node.lineno)
    return sorted(set(lines))


def _modules():
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if NOT_SCANNED not in path.parents:
                yield path


def _found() -> dict[tuple[str, str], int]:
    found = {}
    for path in _modules():
        text = path.read_text()
        lines = text.splitlines()
        for line in name_uses(text, families.NAMES):
            found[(str(path.relative_to(ROOT)), lines[line - 1].strip())] = line
    return found


def test_no_module_outside_the_families_decides_by_a_familys_name():
    found = _found()
    unexplained = [
        f"{path}:{line}: {text}"
        for (path, text), line in found.items()
        if (path, text) not in ALLOWED
    ]
    assert not unexplained, (
        "decide by a field of the family's record (trainer/families/family.py), not by its "
        "name; or add the line to ALLOWED with why:\n" + "\n".join(unexplained)
    )
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"ALLOWED lists lines that no longer name a family: {stale}"


@pytest.mark.parametrize(
    "source",
    [
        'x = 3 if family == "modernbert" else 2',
        'if name in ("roberta", "bert"): pass',
        'rate = RATE["modernbert"]',
        'ratio = medians["modernbert", length]',
        'RATE = {"roberta": 0.15}',
        'match family:\n    case "bert":\n        pass',
    ],
)
def test_the_guard_sees_each_way_of_deciding_by_a_name(source):
    assert name_uses(source, families.NAMES) != []


def test_a_name_that_enters_is_not_a_decision():
    source = (
        'record = families.get("roberta")\n'
        'parser.add_argument("--family", choices=("roberta", "bert"), default="roberta")\n'
    )
    assert name_uses(source, families.NAMES) == []
