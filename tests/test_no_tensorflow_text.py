"""Our code never imports tensorflow_text: keras-hub 0.32 requires the package on Linux (so the
TensorFlow stacks install it; the JAX TPU stack installs keras-hub without it), but nothing of
ours may depend on it. Its ops are ragged/string ops that cannot run inside an XLA-compiled
step, and on the TensorFlow TPU stack its build is only there to satisfy pip; a stack where it
is missing or mismatched must still train."""

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("common", "beam_pipelines", "trainer", "benchmarks")
BANNED = "tensorflow_text"


def _imported_names(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", ""))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            yield str(node.args[0].value)


def test_no_source_file_imports_tensorflow_text():
    offenders = []
    for package in PACKAGES + ("tests",):
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in (f for f in files if f.endswith(".py")):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), path)
                if any(n.split(".")[0] == BANNED for n in _imported_names(tree)):
                    offenders.append(os.path.relpath(path, ROOT))
    offenders = [p for p in offenders if p != os.path.relpath(__file__, ROOT)]
    assert offenders == []


def test_the_scan_sees_every_import_form():
    source = (
        "import tensorflow_text\nfrom tensorflow_text import x\n"
        "importlib.import_module('tensorflow_text.ops')\n__import__('tensorflow_text')\n"
    )
    names = list(_imported_names(ast.parse(source)))
    assert [n.split(".")[0] for n in names] == [BANNED] * 4


_IMPORT_ALL = """
import importlib, importlib.util, pkgutil, sys
import numpy as np
sys.modules["tensorflow_text"] = None  # any import of it raises ImportError from here on
has_tensorflow = importlib.util.find_spec("tensorflow") is not None
import trainer
for info in pkgutil.walk_packages(trainer.__path__, "trainer."):
    if not info.name.endswith("__main__"):
        try:
            importlib.import_module(info.name)
        except ImportError as err:  # the TensorFlow backend's modules, on the JAX TPU stack
            if has_tensorflow or err.name != "tensorflow":
                raise
from trainer import families
from trainer.models import model
for name in ("roberta", "bert"):  # builds the keras-hub models our runs use
    family = families.get(name)
    lm = model.build_masked_lm(family, model.backbone_config(family, "tiny", 64, 16))
    feeds = {"token_ids": np.ones((2, 16), "int32"), "padding_mask": np.ones((2, 16), bool),
             "segment_ids": np.zeros((2, 16), "int32"), "mask_positions": np.zeros((2, 3), "int32")}
    logits = lm.predict({k: v for k, v in feeds.items() if k in lm.input}, verbose=0)
    assert logits.shape == (2, 3, 64), logits.shape
print(sorted(m for m in sys.modules if m.split(".")[0] == "trainer"))
print(sys.modules["tensorflow_text"] is None, "keras_hub" in sys.modules)
"""


@pytest.mark.slow
def test_every_trainer_module_and_both_models_work_without_tensorflow_text():
    # keras-hub's own __init__ imports tensorflow_text when it can (try blocks in its
    # tokenizers), so "not in sys.modules" cannot hold once keras_hub is imported. What must
    # hold: with the package made unimportable, a fresh interpreter imports every trainer
    # module and builds and runs both model families.
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    modules, flags = result.stdout.strip().splitlines()[-2:]
    assert "trainer.task" in modules and "trainer.export" in modules
    assert flags == "True True"  # still blocked, and keras_hub did load
