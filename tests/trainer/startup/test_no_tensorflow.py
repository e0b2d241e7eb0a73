"""The JAX trainer on a machine without TensorFlow (the JAX TPU stack, the GPU machine): no
module a JAX run imports may import TensorFlow, and train, an exact resume, export, predict
and fine-tune work with TensorFlow unimportable (tests/support/no_tensorflow.py). The resume
follows a stop between intervals, in-process (a SIGKILLed JAX run resuming exactly is
test_preemption.py's, with TensorFlow installed; a third process here would cost ~15 s).

The static check runs on both test passes; the subprocess ones, on the JAX pass only."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from tests import test_layers
from tests.support import no_tensorflow

ROOT = str(test_layers.ROOT)
# What a JAX run or tool starts from (`python -m ...`, or the package a program imports).
JAX_ENTRY_POINTS = (
    "trainer",
    "trainer.startup.launch",
    "trainer.task",
    "trainer.pretraining.task",
    "trainer.release.export",
    "trainer.release.predict",
    "trainer.finetuning.finetune",
    "trainer.release.fill_mask_demo",
    "trainer.release.baseline",
    "trainer.release.plot",
    "trainer.release.push",
    "trainer.models.init_from",
    "trainer.release.model_card",
    "trainer.backends.jax_backend",
    "common.verify",
)
TENSORFLOW = ("tensorflow", "tensorflow_text", "tf_keras")
jax_pass_only = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") != "jax", reason="runs on the JAX pass (KERAS_BACKEND=jax)"
)


def _import_time_statements(body):
    """The statements Python runs when the module is imported: its body, and the bodies of
    its top-level if/try/with/for blocks and classes; not the functions' bodies."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _import_time_statements(getattr(node, field, []) or [])


def import_time_edges(modules) -> tuple[dict, set]:
    """({module: the modules of ours it imports when imported, its parent packages
    included}, {modules importing a TensorFlow package when imported})."""
    edges, direct = {}, set()
    for name, (_, tree) in modules.items():
        deps = {name.rsplit(".", 1)[0]} if "." in name else set()
        for node in _import_time_statements(tree.body):
            if isinstance(node, ast.Import):
                names = {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = {f"{node.module}.{a.name}" for a in node.names} & modules.keys() | {
                    node.module
                }
            else:
                continue
            if any(n.split(".")[0] in TENSORFLOW for n in names):
                direct.add(name)
            deps |= names
        edges[name] = {d for d in deps if d in modules and d != name}
    return edges, direct


def _chain(edges, start, targets):
    """The import chain from `start` to a module of `targets`, or None."""
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        if path[-1] in targets:
            return path
        for nxt in sorted(edges[path[-1]] - seen):
            seen.add(nxt)
            paths.append(path + [nxt])
    return None


def test_no_module_a_jax_run_imports_imports_tensorflow():
    """Only modules no JAX entry point reaches may import TensorFlow when imported (today:
    the TensorFlow backend, its strategies, the tf.data pipeline)."""
    edges, tensorflow_importers = import_time_edges(test_layers._modules())
    assert {
        "trainer.backends.tensorflow_strategy",
        "trainer.backends.tensorflow_backend",
        "trainer.data.data_tf",
    } <= tensorflow_importers
    chains = [
        " -> ".join(chain)
        for chain in (_chain(edges, entry, tensorflow_importers) for entry in JAX_ENTRY_POINTS)
        if chain
    ]
    assert chains == [], f"import TensorFlow: {sorted(tensorflow_importers)}"


def test_the_scan_sees_imports_in_blocks_but_not_in_functions():
    tree = ast.parse(
        "import a\nif x:\n    import tensorflow\ntry:\n    from b import c\n"
        "except ImportError:\n    pass\ndef f():\n    import tensorflow_text\n"
    )
    edges, direct = import_time_edges(
        {"m": (None, tree), "b": (None, ast.parse("")), "b.c": (None, ast.parse(""))}
    )
    assert direct == {"m"} and edges["m"] == {"b", "b.c"}


def _run(args):
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=no_tensorflow.env(),
    )


def _weights(path) -> dict:
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, item: (
                found.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None
            )
        )
    return found


@pytest.mark.slow
@jax_pass_only
def test_train_stop_resume_export_predict_finetune_without_tensorflow(tmp_path):
    root = str(tmp_path)
    flow = _run(["tests.trainer.no_tensorflow_flow", root])
    assert flow.returncode == 0, flow.stderr[-3000:]
    found = json.loads(flow.stdout.strip().splitlines()[-1])
    print("seconds per part:", found["seconds"])
    assert not found["tensorflow_imported"]
    assert "trainer.backends.tensorflow_backend" not in found["modules"]
    assert "trainer.backends.tensorflow_strategy" not in found["modules"]
    with open(f"{root}/resumed/run_config.json", encoding="utf-8") as f:
        assert [a["start_step"] for a in json.load(f)["attempts"]] == [0, 4]
    state = "backup/state-00000008.weights.h5"  # weights and optimizer state
    full, again = _weights(f"{root}/full/{state}"), _weights(f"{root}/resumed/{state}")
    assert full.keys() == again.keys() and len(full) > 10
    for name in full:
        np.testing.assert_array_equal(again[name], full[name], err_msg=name)
    for kind in ("train", "validation"):  # TensorBoard logs, written without TensorFlow
        assert [n for n in os.listdir(f"{root}/full/logs/{kind}") if ".tfevents." in n]
    assert os.listdir(f"{root}/finetune/logs/seed-1")
    assert os.path.exists(f"{root}/export/hf/model.safetensors")
    assert "mask 1:" in flow.stdout  # the prediction printed
