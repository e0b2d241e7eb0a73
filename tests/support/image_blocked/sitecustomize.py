"""Makes importable only what the GPU machine has: the Python distributions its image holds
plus the wheels carried to it, named (normalised) in GPU_IMAGE_ALLOWED; any other installed
distribution's top-level module raises ModuleNotFoundError, as there. The standard library
and this repository stay importable. Child processes inherit it through PYTHONPATH. Used
through `tests.support.gpu_image`. In a namespace several distributions share (`google`:
protobuf, google-cloud-storage, google-auth...) each submodule is judged by the distribution
that installed it, so `google.protobuf` imports and `google.cloud.storage` does not."""

import importlib.abc
import importlib.metadata
import os
import re
import sys


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_ALLOWED = {_normal(n) for n in os.environ.get("GPU_IMAGE_ALLOWED", "").split(",") if n}
_OWNERS = importlib.metadata.packages_distributions()  # top-level module -> distributions


def _shared_owners() -> dict:
    """`{"google.cloud": {...}, "google.cloud.storage": {...}}`: who installed each module
    (two and three levels deep) under a top-level name several distributions share."""
    shared = {name for name, owners in _OWNERS.items() if len(set(owners)) > 1}
    found = {}
    for name in {owner for top in shared for owner in _OWNERS[top]}:
        dist = importlib.metadata.distribution(name)
        name = dist.metadata["Name"]  # parsed once: each read parses the whole METADATA
        for file in dist.files or ():
            parts = [part.split(".")[0] for part in file.parts]
            for depth in (2, 3):
                if len(parts) >= depth and parts[0] in shared:
                    found.setdefault(".".join(parts[:depth]), set()).add(name)
    return found


_SHARED = _shared_owners() if _ALLOWED else {}


class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        owners = _OWNERS.get(name) if "." not in name else _SHARED.get(name)
        if owners and not any(_normal(owner) in _ALLOWED for owner in owners):
            raise ModuleNotFoundError(
                f"No module named {name!r} (its distribution {sorted(owners)[0]} is neither on the "
                "GPU machine nor carried: benchmarks/accel_wheels.py)", name=name)
        return None


if _ALLOWED:
    sys.meta_path.insert(0, _Blocker())
