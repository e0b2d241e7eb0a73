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


def _blocked(name: str) -> bool:
    owners = _OWNERS.get(name) if "." not in name else _SHARED.get(name)
    return bool(owners) and not any(_normal(owner) in _ALLOWED for owner in owners)


class _Hiding(importlib.abc.MetaPathFinder):
    """One of Python's own finders that does not see the blocked modules nor their
    distributions' metadata: an import of one raises ModuleNotFoundError,
    `importlib.util.find_spec` returns None and `importlib.metadata.version` raises
    PackageNotFoundError, as where it is not installed (a finder that raised instead would
    break code that probes, such as torch._dynamo's, which asks find_spec("tensorflow") at
    import)."""

    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if _blocked(name) or not hasattr(self.finder, "find_spec"):
            return None
        return self.finder.find_spec(name, path, target)

    def find_distributions(self, *args, **kwargs):  # importlib.metadata asks here
        found = getattr(self.finder, "find_distributions", lambda *a, **k: ())(*args, **kwargs)
        return (d for d in found if _normal(d.metadata["Name"] or "") in _ALLOWED)

    def invalidate_caches(self):
        if hasattr(self.finder, "invalidate_caches"):
            self.finder.invalidate_caches()


if _ALLOWED:
    sys.meta_path[:] = [_Hiding(finder) for finder in sys.meta_path]
