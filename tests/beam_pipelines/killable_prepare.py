"""`python -m tests.beam_pipelines.killable_prepare KILL_AT PREPARE_FLAGS...`: runs the prepare
CLI and SIGKILLs its own process at a named point (the local runner runs every step in this
process), as a crash, an OOM kill or a lost machine would; `POINT:N:TERM` sends SIGTERM
instead, as `kill`, `timeout` or a CI runner would.

KILL_AT: `locked` (lock taken, nothing written), `shard_write:N` (half-way through the N-th
shard file), `shards:N` (after N shard files), `commit:N` (after the N-th split's manifest).
"""

from __future__ import annotations

import os
import signal
import sys

from beam_pipelines import prepare
from common import fs, manifest, run_lock

_count: dict = {}
_signal = [signal.SIGKILL]


def _kill():
    sys.stdout.flush()
    os.kill(os.getpid(), _signal[0])


def _reached(point: str, nth: int) -> bool:
    _count[point] = _count.get(point, 0) + 1
    return _count[point] == nth


def _half_then_die(chunks):
    """The first chunk's first half, then the kill."""
    for chunk in chunks:
        yield chunk[: len(chunk) // 2]
        _kill()


def _kill_after(call, due):
    """`call`, then the kill when `due()` (asked after each call) says so."""

    def wrapped(*args, **kwargs):
        result = call(*args, **kwargs)
        if due():
            _kill()
        return result

    return wrapped


def _watched_upload(upload, point: str, nth: int):
    """`upload`, torn half-way through the nth shard file (`shard_write`), or followed by the
    kill after it (`shards`); files other than shards go through untouched."""

    def watched_upload(path, chunks):
        if not path.endswith(".tfrecord"):
            return upload(path, chunks)
        if point == "shard_write" and _reached(point, nth):
            return upload(path, _half_then_die(chunks))
        upload(path, chunks)
        if point == "shards" and _reached(point, nth):
            _kill()

    return watched_upload


def arm(point: str, nth: int) -> None:
    run_lock.acquire = _kill_after(run_lock.acquire, lambda: point == "locked")
    fs.upload_stream = _watched_upload(fs.upload_stream, point, nth)
    manifest.write_manifest = _kill_after(
        manifest.write_manifest, lambda: point == "commit" and _reached(point, nth)
    )


if __name__ == "__main__":
    kill_at, flags = sys.argv[1], sys.argv[2:]
    if kill_at != "none":
        name, _, n = kill_at.partition(":")
        n, _, sig = n.partition(":")
        _signal[0] = getattr(signal, f"SIG{sig}") if sig else signal.SIGKILL
        arm(name, int(n or 1))
    sys.exit(prepare.run(flags))
