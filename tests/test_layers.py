"""The packages' shape, as docs/development.md draws it: no import cycle among our modules
(imports inside functions count: hiding a cycle there is still a cycle), `common/` imports
neither half, the trainer imports nothing from `beam_pipelines/`, no production function over
60 lines nor module over 400, trainer/'s rooms import only rooms below them, and the keyed hashes
(BLAKE2b, splitmix64) only where their bits are the contract."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("common", "beam_pipelines", "trainer")
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400
# The modules that may compute a keyed hash: its bits decide shards, dedup and splits, so a
# second copy elsewhere could drift from them. Each entry says why it is one.
HASH_HOMES = {
    "beam_pipelines/hashing.py": "the pipeline's shared helpers (shard, dedup, MinHash keys)",
    "common/splits.py": "the split rule both halves use; common/ cannot import the pipeline",
}
SPLITMIX_CONSTANTS = {0xBF58476D1CE4E5B9, 0x94D049BB133111EB}


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
    """Module -> the modules of ours it imports anywhere in its file (a `from package import
    module` imports the package's __init__ too, which Python runs first)."""
    edges = {}
    for name, (_, tree) in modules.items():
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                named = {f"{node.module}.{alias.name}" for alias in node.names}
                # the package itself too: Python runs its __init__ before the module
                deps |= (named & modules.keys()) | {node.module}
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
    upward = [
        f"{m} -> {d}"
        for m, deps in edges.items()
        for d in sorted(deps)
        if (m.startswith("common") and not d.startswith("common"))
        or (m.startswith("trainer") and d.startswith("beam_pipelines"))
    ]
    assert upward == []


def test_no_production_function_over_60_lines():
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path, tree in _modules().values()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


def test_no_production_module_over_400_lines():
    long = [
        f"{path.relative_to(ROOT)}: {len(path.read_text(encoding='utf-8').splitlines())}"
        for path, _ in _modules().values()
        if len(path.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES
    ]
    assert long == []


def keyed_hashes(tree) -> list[str]:
    """Where a module computes BLAKE2b (`hashlib.blake2b`, or `blake2b` imported from
    hashlib) or uses a splitmix64 constant: by what the code does, not what it is named."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "blake2b":
            found.append(f"blake2b:{node.lineno}")
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "hashlib"
            and any(alias.name == "blake2b" for alias in node.names)
        ):
            found.append(f"blake2b:{node.lineno}")
        elif isinstance(node, ast.Constant) and node.value in SPLITMIX_CONSTANTS:
            found.append(f"splitmix64:{node.lineno}")
    return found


def hash_outside_homes(root=ROOT) -> dict[str, list[str]]:
    found = {
        path.relative_to(root).as_posix(): keyed_hashes(tree)
        for path, tree in _modules(root).values()
    }
    return {name: where for name, where in found.items() if where and name not in HASH_HOMES}


def test_keyed_hashes_only_in_their_homes():
    assert hash_outside_homes() == {}
    for home in HASH_HOMES:  # the scan sees the real ones (and no home is stale)
        assert keyed_hashes(ast.parse((ROOT / home).read_text(encoding="utf-8"))), home


def test_the_hash_scan_sees_every_package(tmp_path):
    """The scan this replaced looked at beam_pipelines/ only and matched function names."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "common" / "keys.py").write_text(
        "import hashlib\n\ndef key(b):\n    return hashlib.blake2b(b, digest_size=8)\n"
    )
    (tmp_path / "trainer" / "spread.py").write_text(
        "from hashlib import blake2b\n\ndef scramble(h):\n    return h * 0x94D049BB133111EB\n"
    )
    assert hash_outside_homes(tmp_path) == {
        "common/keys.py": ["blake2b:4"],
        "trainer/spread.py": ["blake2b:1", "splitmix64:4"],
    }


def test_tf_distribute_code_lives_in_the_backend_room():
    """README and docs/jax.md: trainer/backends/ holds all that differs between backends,
    TensorFlow's device code (`tf.distribute`) included."""
    outside = sorted(
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for name, (path, tree) in _modules().items()
        if name.startswith("trainer.") and not name.startswith("trainer.backends")
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "distribute"
        and isinstance(node.value, ast.Name)
        and node.value.id == "tf"
    )
    assert outside == []


# trainer/'s rooms, bottom up (trainer/__init__.py): a room imports only rooms below it, no
# module exempted; the launchers (trainer/*.py) sit above them all.
ROOMS = (
    "startup",
    "families",
    "run_folder",
    "data",
    "backends",
    "models",
    "training",
    "release",
    "tasks",
    "pretraining",
    "finetuning",
)


def _floor(module: str) -> int | None:
    """The module's floor in ROOMS (the launchers above them all), or None."""
    parts = module.split(".")
    if parts[0] != "trainer" or len(parts) < 2:
        return None
    if parts[1] not in ROOMS:
        return len(ROOMS)  # a launcher
    return ROOMS.index(parts[1])


# The two training commands' rooms sit side by side: what they share lives below both.
SIDE_BY_SIDE = {("finetuning", "pretraining"), ("pretraining", "finetuning")}


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "trainer" and len(parts) > 1 else None


def upward_imports(edges) -> list[str]:
    return sorted(
        f"{m} -> {d}"
        for m, deps in edges.items()
        for d in deps
        if _floor(m) is not None
        and _floor(d) is not None
        and (_floor(d) > _floor(m) or (_room(m), _room(d)) in SIDE_BY_SIDE)
    )


def test_each_room_imports_only_rooms_below_it():
    """Each room stands on the rooms below it, and the two commands' rooms not on each other."""
    edges = import_edges(_modules())
    assert upward_imports(edges) == []
    rooms = {p.name for p in (ROOT / "trainer").iterdir() if (p / "__init__.py").exists()}
    assert rooms == set(ROOMS)  # a new room takes its floor here


def test_the_room_check_sees_an_upward_import():
    edges = {"trainer.models.init_from": {"trainer.release.export"}, "trainer.task": set()}
    assert upward_imports(edges) == ["trainer.models.init_from -> trainer.release.export"]
    assert upward_imports({"trainer.pretraining.task": {"trainer.release.export"}}) == []
    sideways = {"trainer.finetuning.classifier": {"trainer.pretraining.train_step"}}
    assert upward_imports(sideways) == [
        "trainer.finetuning.classifier -> trainer.pretraining.train_step"
    ]
