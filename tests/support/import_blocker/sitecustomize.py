"""Makes packages unimportable in every interpreter started with this folder first on
PYTHONPATH (Python imports `sitecustomize` at startup; child processes inherit PYTHONPATH),
as on a machine where they are not installed. Two lists say which, from the environment:
- IMPORT_BLOCKER_DENY: top-level modules to hide (`tests.support.no_tensorflow`: TensorFlow);
- GPU_IMAGE_ALLOWED: the only distributions to keep, named (normalised) as the GPU machine's
  image and the wheels carried to it (`tests.support.gpu_image`); the standard library and
  this repository stay importable. In a namespace several distributions share (`google`:
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
_DENIED = {n for n in os.environ.get("IMPORT_BLOCKER_DENY", "").split(",") if n}
_OWNERS = importlib.metadata.packages_distributions() if _ALLOWED or _DENIED else {}
# The distributions that install a denied module: their metadata is hidden too.
_DENIED_DISTS = {_normal(d) for top in _DENIED for d in _OWNERS.get(top, ())}


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
    if name.split(".")[0] in _DENIED:
        return True
    if not _ALLOWED:
        return False
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
        return (d for d in found if _shown(_normal(d.metadata["Name"] or "")))

    def invalidate_caches(self):
        if hasattr(self.finder, "invalidate_caches"):
            self.finder.invalidate_caches()


def _shown(dist: str) -> bool:
    return dist not in _DENIED_DISTS and (not _ALLOWED or dist in _ALLOWED)


if _ALLOWED or _DENIED:
    sys.meta_path[:] = [_Hiding(finder) for finder in sys.meta_path]
