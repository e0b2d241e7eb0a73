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


def arm(point: str, nth: int) -> None:
    acquire, upload, write_manifest = run_lock.acquire, fs.upload_stream, manifest.write_manifest

    def acquire_then_die(*args, **kwargs):
        held = acquire(*args, **kwargs)
        if point == "locked":
            _kill()
        return held

    def watched_upload(path, chunks):
        if not path.endswith(".tfrecord"):
            return upload(path, chunks)
        if point == "shard_write" and _reached(point, nth):

            def half_then_die():
                for chunk in chunks:
                    yield chunk[: len(chunk) // 2]
                    _kill()

            return upload(path, half_then_die())
        upload(path, chunks)
        if point == "shards" and _reached(point, nth):
            _kill()

    def manifest_then_die(split_dir, found):
        digest = write_manifest(split_dir, found)
        if point == "commit" and _reached(point, nth):
            _kill()
        return digest

    run_lock.acquire, fs.upload_stream, manifest.write_manifest = (
        acquire_then_die,
        watched_upload,
        manifest_then_die,
    )


if __name__ == "__main__":
    kill_at, flags = sys.argv[1], sys.argv[2:]
    if kill_at != "none":
        name, _, n = kill_at.partition(":")
        n, _, sig = n.partition(":")
        _signal[0] = getattr(signal, f"SIG{sig}") if sig else signal.SIGKILL
        arm(name, int(n or 1))
    sys.exit(prepare.run(flags))
