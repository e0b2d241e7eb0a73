"""What every `python -m trainer.X` command does before it imports Keras, then runs its `main`.

Keras reads its backend once, at its first import, so the backend is chosen here
(`keras_backend.choose`: `--backend`, then KERAS_BACKEND, then TensorFlow) before the command's
module is imported. TensorFlow is imported with its harmless start-up lines hidden: on the
TensorFlow backend, and on JAX where it is installed, because keras-hub imports it whenever it
can (keras_hub/src/utils/tensor_utils.py); where it is not installed nothing imports it
(tests/trainer/startup/test_no_tensorflow.py). Importing any `trainer` module does none of
this: only a command (or a test's conftest, or a benchmark) asks for it.

Example (trainer/task.py, the whole launcher):
    >>> main = launch.command("trainer.pretraining.task")
    >>> if __name__ == "__main__":
    ...     launch.run(main.module)
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from trainer.startup import keras_backend, quiet


def prepare(argv: list[str] | None = None) -> str:
    """Chooses the Keras backend (from `argv`, default the command line) and imports
    TensorFlow quietly where it will be imported anyway; returns the backend."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # TensorFlow's C++ INFO lines: not for users
    backend = keras_backend.choose(argv)
    if backend == "tensorflow" or importlib.util.find_spec("tensorflow"):
        quiet.import_tensorflow()
    quiet.hide_grain_read_ahead_note()
    return backend


def run(module: str) -> None:
    """`prepare`, then exits with `module.main()`'s status (its flags from the command line)."""
    prepare()
    sys.exit(importlib.import_module(module).main())


def command(module: str):
    """A launcher's `main(argv=None) -> int`: `module`'s command called from Python (on the
    backend Keras was imported with), imported only when called so that importing the
    launcher imports nothing of Keras."""

    def main(argv=None) -> int:
        return importlib.import_module(module).main(argv)

    main.module = module
    main.__doc__ = f"`{module}.main`: the command from Python."
    return main
