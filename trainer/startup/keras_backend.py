"""Chooses the Keras backend once, before anything imports keras.

`--backend tensorflow|jax` on the command line wins over KERAS_BACKEND (Keras' own
convention), which wins over the default, TensorFlow. Keras reads KERAS_BACKEND at its first
import and cannot switch afterwards, so every command calls `choose` before it imports its
module (trainer/startup/launch.py); `TrainConfig.backend` then records what was chosen
(run_config.json) and a resumed run on the other backend is refused
(trainer/pretraining/plan.py FIXED).

Example:
    >>> choose(["--train_data", "d", "--backend", "jax"])
    'jax'
"""

from __future__ import annotations

import os
import sys

from common.errors import UserError

BACKENDS = ("tensorflow", "jax")
DEFAULT = "tensorflow"


def from_argv(argv: list[str]) -> str | None:
    """The value of the last `--backend X` / `--backend=X` flag (argparse keeps the last one
    too, so the backend chosen here is the one the parsed flags record), or None."""
    found = None
    for index, arg in enumerate(argv):
        if arg == "--backend" and index + 1 < len(argv):
            found = argv[index + 1]
        elif arg.startswith("--backend="):
            found = arg.split("=", 1)[1]
    return found


class BackendError(UserError):
    """KERAS_BACKEND names a backend this trainer does not run on."""


_refused: str | None = None  # an unsupported KERAS_BACKEND that `choose` replaced


def choose(argv: list[str] | None = None) -> str:
    """Sets KERAS_BACKEND from the flag, the environment or the default; returns it. An
    unknown flag value is left for the flag parser to reject with its usage line; an unknown
    KERAS_BACKEND (torch, numpy, openvino...) is replaced by the default, so that importing
    Keras works, and remembered for `check` to refuse with one line."""
    global _refused
    flag = from_argv(sys.argv[1:] if argv is None else argv)
    env = os.environ.get("KERAS_BACKEND")
    name = flag or env or DEFAULT
    if "keras" not in sys.modules:
        _refused = env if flag is None and env not in (None, *BACKENDS) else None
        os.environ["KERAS_BACKEND"] = name if name in BACKENDS else DEFAULT
    return os.environ.get("KERAS_BACKEND", DEFAULT)


def check() -> None:
    """Raises BackendError if the backend came from a KERAS_BACKEND this trainer cannot use."""
    if _refused is not None:
        raise BackendError(
            f"KERAS_BACKEND={_refused} is not a backend of this trainer; use "
            f"{' or '.join(BACKENDS)} (KERAS_BACKEND or --backend)."
        )
