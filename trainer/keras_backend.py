"""Chooses the Keras backend once, before anything imports keras.

`--backend tensorflow|jax` on the command line wins over KERAS_BACKEND (Keras' own
convention), which wins over the default, TensorFlow. Keras reads KERAS_BACKEND at its first
import and cannot switch afterwards, so the trainer package calls `choose` when it is first
imported; `TrainConfig.backend` then records what was chosen (run_config.json) and a resumed
run on the other backend is refused (trainer/plan.py FIXED).

Example:
    >>> choose(["--train_data", "d", "--backend", "jax"])
    'jax'
"""

from __future__ import annotations

import os
import sys

BACKENDS = ("tensorflow", "jax")
DEFAULT = "tensorflow"


def from_argv(argv: list[str]) -> str | None:
    """The value of a `--backend X` / `--backend=X` flag, or None."""
    for index, arg in enumerate(argv):
        if arg == "--backend" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--backend="):
            return arg.split("=", 1)[1]
    return None


def choose(argv: list[str] | None = None) -> str:
    """Sets KERAS_BACKEND from the flag, the environment or the default; returns it. An
    unknown name is left for the flag parser to reject with its usage line."""
    name = from_argv(sys.argv[1:] if argv is None else argv) or os.environ.get(
        "KERAS_BACKEND") or DEFAULT
    if name in BACKENDS and "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = name
    return os.environ.get("KERAS_BACKEND", DEFAULT)
