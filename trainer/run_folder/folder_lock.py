"""One training run per run folder: the chief holds `{output_dir}/_LOCK` while it runs.

The lock is the prepare pipeline's own (common/run_lock.py: compare-and-swap on one small
object, locally under an flock, on gs:// by generation): two trainers started on one
--output_dir, with different seeds say, would each read the saved run and write its files,
leaving one run's run_config.json beside the other's backups. The chief takes the lock
before it reads the saved run, refreshes it every minute from a thread and releases it when
it exits (also on an error or SIGTERM); a second trainer is refused in one line naming the
holder. A lock is taken over only when its holder is gone: its process no longer exists (on
the same machine), its heartbeat is older than --lock_timeout_hours (a restart on a new VM
after a preemption), or with --takeover_lock. A run whose lock was taken over stops at its
next interval end, before it writes anything more (`LockKept`).

Example:
    >>> with held(config.lock, config.data.output_dir, chief=True) as lock:
    ...     train(..., callbacks=[LockKept(lock)])
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time

import keras

from common import fs, run_lock
from common.errors import UserError
from trainer.run_folder.lock_flags import LockFlags


def new_run_id() -> str:
    """`tYYYYmmddHHMMSS` + 6 hex digits: one attempt of a training run, in its lock."""
    return time.strftime("t%Y%m%d%H%M%S", time.gmtime()) + secrets.token_hex(3)


@contextlib.contextmanager
def held(
    flags: LockFlags,
    output_dir: str,
    chief: bool,
    heartbeat_seconds: float = run_lock.HEARTBEAT_SECONDS,
):
    """The lock of `output_dir` while the block runs (None on a non-chief process, which
    writes nothing), as the lock flags say; LockedError (one line) if another live run holds
    it."""
    if not chief:
        yield None
        return
    output_dir = output_dir.rstrip("/")
    new_folder = not fs.is_remote(output_dir) and not os.path.exists(output_dir)
    run_id = new_run_id()
    lock = run_lock.acquire(
        output_dir,
        run_id,
        f"trainer ({keras.backend.backend()})",
        takeover=flags.takeover_lock,
        stale=run_lock.StaleRule(flags.lock_timeout_hours),
        heartbeat_seconds=heartbeat_seconds,
        kind=run_lock.TRAINING,
    )
    try:
        with lock.heartbeat():
            yield lock
    finally:
        run_lock.release(output_dir, run_id)
        if new_folder:  # a refused start leaves no empty folder behind
            fs.remove_empty_folder(output_dir)


class LockLost(UserError):
    """Another run took the folder over while this one trained."""


class LockKept(keras.callbacks.Callback):
    """Stops the run at an interval end if its lock was taken over meanwhile; listed before
    the callbacks that write, so nothing of this interval is written."""

    def __init__(self, lock):
        super().__init__()
        self.lock = lock

    def on_epoch_end(self, epoch, logs=None):
        if self.lock is not None and self.lock.lost is not None:
            raise LockLost(f"{self.lock.lost} This training run stops without writing.")
