"""The packages' shape, as docs/development.md draws it: no import cycle among our modules
(imports inside functions count: hiding a cycle there is still a cycle), `common/` imports
neither half, the trainer imports nothing from `beam_pipelines/`, no production function over
60 lines, and the prepare pipeline's layers are the ones the development guide lists."""

import ast
import functools
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("common", "beam_pipelines", "trainer")
MAX_FUNCTION_LINES = 60


def _modules(root=ROOT):
    """{module name: (path, parsed tree)} for every module of our packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(p for p in parts if p != "__init__")
            found[name] = (path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def import_edges(modules) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports anywhere in its file (the package __init__
    of a `from package import module` left out: it is not what the code uses)."""
    edges = {}
    for name, (_, tree) in modules.items():
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                named = {f"{node.module}.{alias.name}" for alias in node.names}
                deps |= named & modules.keys() or {node.module}
        edges[name] = {d for d in deps if d in modules and d != name}
    return edges


def cycles(edges) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def levels(edges, package="beam_pipelines") -> dict[str, int]:
    """A module's level within `package`: 1 + the highest level among the package's modules it
    imports (1: imports none of them; package `__init__`s left out). Defined only without
    cycles."""
    packages = {m for m in edges if any(other.startswith(m + ".") for other in edges)}
    inside = {m: {d for d in deps if d.startswith(package + ".") and d not in packages}
              for m, deps in edges.items() if m.startswith(package + ".") and m not in packages}

    @functools.lru_cache(maxsize=None)
    def level(module):
        return 1 + max((level(d) for d in inside[module]), default=0)

    return {m[len(package) + 1:]: level(m) for m in inside}


def test_no_import_cycle():
    assert cycles(import_edges(_modules())) == []


def test_the_cycle_finder_sees_a_cycle_through_a_function_level_import(tmp_path):
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "a.py").write_text("from common import b\n")
    (tmp_path / "common" / "b.py").write_text("def f():\n    from common import a\n")
    for package in PACKAGES[1:]:
        (tmp_path / package).mkdir()
    assert cycles(import_edges(_modules(tmp_path))) == [["common.a", "common.b"]]


def test_common_imports_neither_half_and_the_trainer_not_the_pipeline():
    edges = import_edges(_modules())
    upward = [f"{m} -> {d}" for m, deps in edges.items() for d in sorted(deps)
              if (m.startswith("common") and not d.startswith("common"))
              or (m.startswith("trainer") and d.startswith("beam_pipelines"))]
    assert upward == []


def test_no_production_function_over_60_lines():
    long = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
            for path, tree in _modules().values() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []


def test_the_development_guide_lists_the_pipeline_layers_as_they_are():
    """docs/development.md's "level N: a, b" lines name every beam_pipelines module once, at
    its level: a newcomer reads the pipeline bottom-up from there."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    listed = {}
    for number, names in re.findall(r"^- level (\d+): (.+)$", text, flags=re.M):
        for name in names.split(", "):
            listed[name.strip("` ")] = int(number)
    assert listed == levels(import_edges(_modules()))
