"""Runs code as on the borrowed GPU machine: only the distributions of its image and the
wheels carried to it are importable (benchmarks/accel_wheels.py IMAGE and CARRIED), on the
JAX backend, TensorFlow included in what is missing.

Example:
    >>> result = subprocess.run(cmd, env=gpu_image.env(), ...)
"""

from __future__ import annotations

from benchmarks import accel_wheels
from tests.support import no_tensorflow

# This repository's own distribution (an editable install), the test runner, and what
# setuptools vendors on the machine but this venv installs as distributions of their own
# (torch.compile's C++ build imports setuptools).
_HERE = (
    "mlm-pretrain",
    "pytest",
    "pluggy",
    "iniconfig",
    "jaraco-text",
    "jaraco-functools",
    "jaraco-context",
    "autocommand",
    "more-itertools",
    "backports-tarfile",
    "platformdirs",
    "tomli",
)


def env(**extra) -> dict:
    """`no_tensorflow.env()` with everything else the machine lacks blocked too."""
    base = no_tensorflow.env(**extra)
    allowed = sorted(
        accel_wheels.IMAGE | {accel_wheels.normal(n) for n in accel_wheels.CARRIED} | set(_HERE)
    )
    return {**base, "GPU_IMAGE_ALLOWED": ",".join(allowed)}  # the same blocker, one list more
