"""Importing any trainer module has no side effect beyond importing: only a command
(trainer/startup/launch.py) chooses the Keras backend from its flags."""

import os
import subprocess
import sys

from tests import test_layers

_IMPORT_EVERY_MODULE = """
import importlib, os, pkgutil, sys
sys.argv = ["x", "--backend", "jax"]  # what a command line would say: not read by an import
import trainer
for info in pkgutil.walk_packages(trainer.__path__, "trainer."):
    importlib.import_module(info.name)
print(os.environ.get("KERAS_BACKEND"), len([m for m in sys.modules if m.startswith("trainer.")]))
"""


def _python(code: str) -> list[str]:
    """The words the last line of `code` printed, run where KERAS_BACKEND is unset."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=test_layers.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.splitlines()[-1].split()


def test_importing_every_trainer_module_leaves_the_backend_choice_to_the_command():
    chosen, imported = _python(_IMPORT_EVERY_MODULE)
    assert chosen == "None" and int(imported) > 80


def test_a_command_chooses_the_backend_from_its_flags():
    code = (
        "from trainer.startup import launch; chosen = launch.prepare(['--backend', 'jax']); "
        "import keras; print(chosen, keras.backend.backend())"
    )
    assert _python(code) == ["jax", "jax"]
