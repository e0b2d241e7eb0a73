"""Makes importable only what the GPU machine has: the Python distributions its image holds
plus the wheels carried to it, named (normalised) in GPU_IMAGE_ALLOWED; any other installed
distribution's top-level module raises ModuleNotFoundError, as there. The standard library
and this repository stay importable. Child processes inherit it through PYTHONPATH. Used
through `tests.support.gpu_image`. (Submodules of a namespace shared by several
distributions, e.g. `google.*`, are not told apart: `google` is allowed with protobuf.)"""

import importlib.abc
import importlib.metadata
import os
import re
import sys


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_ALLOWED = {_normal(n) for n in os.environ.get("GPU_IMAGE_ALLOWED", "").split(",") if n}
_OWNERS = importlib.metadata.packages_distributions()  # top-level module -> distributions


class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        owners = _OWNERS.get(name) if "." not in name else None
        if owners and not any(_normal(owner) in _ALLOWED for owner in owners):
            raise ModuleNotFoundError(
                f"No module named {name!r} (its distribution {owners[0]} is neither on the "
                "GPU machine nor carried: benchmarks/accel_wheels.py)", name=name)
        return None


if _ALLOWED:
    sys.meta_path.insert(0, _Blocker())
