"""Compare-and-swap on one small JSON object, locally and on GCS (for run_lock.py).

`load` returns the record and its version; `replace` and `delete` succeed only if the
object is still at that version (version `None` = absent, so `replace(path, r, None)` is
"create only if absent"). On GCS the version is the object's generation and the condition is
GCS's own `ifGenerationMatch` (generation 0 = absent), one atomic request (Beam's filesystem
layer has no conditional write, hence google-cloud-storage here). Locally the version is the
sha256 of the content, and compare-and-write runs under an exclusive `flock` of the folder;
writes are a rename, so a read never sees half a record.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os

from common import fs
from common.errors import UserError


def _encode(record: dict) -> bytes:
    return (json.dumps(record, indent=1, sort_keys=True) + "\n").encode()


def _decode(data: bytes) -> dict:
    try:
        record = json.loads(data)
    except ValueError:
        record = None
    # An unreadable lock is one with no owner and no heartbeat: stale, never "absent".
    return record if isinstance(record, dict) else {"run_id": "?", "heartbeat": 0}


def load(path: str) -> tuple[dict | None, object]:
    if fs.is_remote(path):
        return _gcs_load(path)
    try:
        data = fs.read_bytes(path)
    except (OSError, FileNotFoundError):
        if os.path.exists(path):
            raise
        return None, None
    return _decode(data), hashlib.sha256(data).hexdigest()


def replace(path: str, record: dict, version) -> bool:
    """Writes `record` if the object is still at `version`; False if it changed."""
    if fs.is_remote(path):
        return _gcs_write(path, _encode(record), version)
    with _folder_locked(path):
        if _local_version(path) != version:
            return False
        folder = os.path.dirname(os.path.abspath(path))
        temp = os.path.join(folder, fs.temp_name(path))
        with open(temp, "wb") as f:
            f.write(_encode(record))
        os.replace(temp, path)
        return True


def delete(path: str, version) -> bool:
    """Deletes the object if it is still at `version`; False if it changed or is gone."""
    if fs.is_remote(path):
        return _gcs_delete(path, version)
    with _folder_locked(path):
        if version is None or _local_version(path) != version:
            return False
        os.remove(path)
        return True


@contextlib.contextmanager
def _folder_locked(path: str):
    """An exclusive flock on the folder itself: no extra file in the output folder."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _local_version(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return None


# google-cloud-storage is imported only for a gs:// lock: a trainer on a machine with local
# folders alone (the borrowed GPU machine: docs/benchmarks.md) does not have it.
@functools.lru_cache(maxsize=1)
def _client():
    from google.cloud import storage

    return storage.Client()


def _blob(path: str):
    if not path.startswith("gs://"):
        raise UserError(
            f"{path}: an output folder is local or on gs:// (the lock needs "
            "a store with conditional writes)"
        )
    bucket, _, name = path[len("gs://") :].partition("/")
    return _client().bucket(bucket).blob(name)


def _gcs_load(path: str) -> tuple[dict | None, object]:
    from google.api_core.exceptions import NotFound, PreconditionFailed

    blob = _blob(path)
    for _ in range(5):  # the object may be replaced between its metadata and its bytes
        try:
            blob.reload()
            generation = blob.generation  # read first: a download resets blob properties
            data = blob.download_as_bytes(if_generation_match=generation)
        except NotFound:
            return None, None
        except PreconditionFailed:
            continue
        return _decode(data), generation
    raise OSError(f"{path} keeps changing while it is read")


def _gcs_write(path: str, data: bytes, version) -> bool:
    from google.api_core.exceptions import PreconditionFailed

    try:
        _blob(path).upload_from_string(
            data, content_type="application/json", if_generation_match=version or 0
        )
    except PreconditionFailed:
        return False
    return True


def _gcs_delete(path: str, version) -> bool:
    from google.api_core.exceptions import NotFound, PreconditionFailed

    if version is None:
        return False
    try:
        _blob(path).delete(if_generation_match=version)
    except (PreconditionFailed, NotFound):
        return False
    return True
