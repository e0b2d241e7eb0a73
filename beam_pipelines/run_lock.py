"""One writer per output folder: `{output_dir}/_LOCK`, created only if absent.

A prepare run takes the lock on the launcher before anything runs and the commit step
releases it; a second run on the same output is refused with a message naming the first.
"Created only if absent" is one atomic operation: `O_CREAT | O_EXCL` locally, an upload
with `ifGenerationMatch=0` on GCS (Beam's filesystem layer has no conditional write, hence
google-cloud-storage here). The commit step checks that the lock still names its run, so a
run whose lock was taken over can never commit over the new owner's output.

A lock is stale, and taken over with a warning, when its run has recorded its end, when it
was taken on this host by a process that no longer exists, or when it is older than
`--lock_timeout_hours`; any other lock is taken over only with `--takeover_lock`.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from common import fs
from common.errors import UserError

LOCK_NAME = "_LOCK"


class LockedError(UserError):
    """Another run holds the output folder."""


def lock_path(output_dir: str) -> str:
    return fs.join(output_dir, LOCK_NAME)


def _create_if_absent(path: str, data: bytes) -> bool:
    """Writes `path` unless it exists, atomically; False if it existed."""
    if not fs.is_remote(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return True
    from google.api_core.exceptions import PreconditionFailed
    from google.cloud import storage

    bucket, _, name = path[len("gs://"):].partition("/")
    blob = storage.Client().bucket(bucket).blob(name)
    try:
        blob.upload_from_string(data, content_type="application/json", if_generation_match=0)
    except PreconditionFailed:
        return False
    return True


def read(output_dir: str) -> dict | None:
    try:
        return json.loads(fs.read_bytes(lock_path(output_dir)))
    except (OSError, ValueError):  # absent (or unreadable: treated as absent by acquire)
        return None


def _stale_reason(lock: dict, timeout_hours: float, ended) -> str | None:
    if ended(lock.get("run_id", "")):
        return "that run has ended"
    age_hours = (time.time() - float(lock.get("started", 0))) / 3600
    if age_hours > timeout_hours:
        return f"it is {age_hours:.1f} h old (--lock_timeout_hours {timeout_hours:g})"
    if lock.get("host") == socket.gethostname() and lock.get("pid"):
        try:
            os.kill(int(lock["pid"]), 0)
        except ProcessLookupError:
            return f"its process {lock['pid']} on this host no longer exists"
        except PermissionError:
            pass
    return None


def acquire(output_dir: str, run_id: str, runner: str, *, takeover: bool = False,
            timeout_hours: float = 72.0, ended=lambda run_id: False) -> None:
    """Takes the output folder for `run_id`, or raises LockedError naming the holder."""
    mine = {"run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(),
            "started": time.time(), "runner": runner}
    data = (json.dumps(mine, indent=1) + "\n").encode()
    for _ in range(2):  # a second try after removing a stale lock
        if _create_if_absent(lock_path(output_dir), data):
            return
        held = read(output_dir) or {}
        reason = "--takeover_lock" if takeover else _stale_reason(held, timeout_hours, ended)
        if reason is None:
            started = time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                    time.gmtime(float(held.get("started", 0))))
            raise LockedError(
                f"{output_dir} is being written by prepare run {held.get('run_id', '?')} "
                f"(started {started} on {held.get('host', '?')}, pid {held.get('pid', '?')}, "
                f"{held.get('runner', '?')}). Wait for it to end; if it is dead, pass "
                "--takeover_lock.")
        print(f"warning: taking over the lock of run {held.get('run_id', '?')} on "
              f"{output_dir}: {reason}", file=sys.stderr)
        fs.delete([lock_path(output_dir)])
    raise LockedError(f"{output_dir}: another run took the lock at the same moment; retry.")


def owner(output_dir: str) -> str | None:
    return (read(output_dir) or {}).get("run_id")


def release(output_dir: str, run_id: str) -> None:
    """Removes the lock if `run_id` holds it (a retried release is a no-op)."""
    if owner(output_dir) == run_id:
        fs.delete([lock_path(output_dir)])
