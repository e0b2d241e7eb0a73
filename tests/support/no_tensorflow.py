"""Runs code as on a machine without TensorFlow (the JAX TPU stack, the GPU machine).

Example:
    >>> result = subprocess.run(cmd, env=no_tensorflow.env(), ...)
"""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLOCKER = os.path.join(ROOT, "tests", "support", "import_blocker")
DENY = ("tensorflow", "tensorflow_text", "tf_keras")


def env(**extra) -> dict:
    """The environment of a subprocess in which `import tensorflow` fails, on the JAX backend."""
    paths = [BLOCKER, ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "KERAS_BACKEND": "jax",
        "IMPORT_BLOCKER_DENY": ",".join(DENY),
        **{k: str(v) for k, v in extra.items()},
    }
