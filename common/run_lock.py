"""One writer per folder: `{folder}/_LOCK`, changed only by compare-and-swap.

Both halves use it, locally and on gs://. A prepare run takes the lock of its output folder
on the launcher before anything runs and the commit step releases it; a training run's chief
takes the lock of its run folder before it reads the saved run and releases it when it
exits (trainer/run_folder/folder_lock.py). A second run on the same folder is refused with a message
naming the first (`kind` says which half holds it).

Every change of the lock is conditional on the version that was read (lock_store.py: an
object generation on GCS, `ifGenerationMatch`; a content digest under an flock locally):
creating it (only if absent), taking a stale one over (only if it is still the stale one
that was judged), refreshing it, releasing it (only if it is still ours). Two launchers
taking over one stale lock: one wins, the other finds a live lock. A release racing a
takeover: the new owner's lock stays.

Liveness. While a run lives its launcher refreshes `heartbeat` every `heartbeat_seconds`;
a lock is stale when its run recorded its end, when its Dataflow job (recorded with
`note_job`) is in a final state, when its process is gone (judged only on the same machine,
boot and PID namespace: a pid means nothing in another container), or when its heartbeat is
older than `--lock_timeout_hours` and no Dataflow job of it is known to run. Any other lock
is taken over only with `--takeover_lock`. The commit calls `confirm` first: a run whose
lock was taken over never commits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable

from common import lock_store, prepared_dir
from common.errors import UserError

HEARTBEAT_SECONDS = 60.0
PREPARE, TRAINING = "prepare run", "training run"  # who holds a lock, for its message
KINDS = (PREPARE, TRAINING)
# Dataflow job states after which the job writes nothing more (Beam's PipelineState names).
FINAL_JOB_STATES = ("DONE", "FAILED", "CANCELLED", "UPDATED", "DRAINED")


class LockedError(UserError):
    """Another run holds the output folder."""


class LockLostError(RuntimeError):
    """Another run took the output over while this one ran: this one must not commit."""


def _load(path: str) -> tuple[dict | None, object]:
    """(the lock's record or None, its version); every read of the lock goes through here."""
    return lock_store.load(path)


def read(output_dir: str) -> dict | None:
    return _load(prepared_dir.lock_path(output_dir))[0]


def owner(output_dir: str) -> str | None:
    return (read(output_dir) or {}).get("run_id")


def boot_id() -> str:
    """This boot of this machine ("" where unknown): pids are only comparable within it."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    """This process's PID namespace ("" where unknown): containers have their own."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _new_record(run_id: str, runner: str, kind: str) -> dict:
    now = time.time()
    return {
        "run_id": run_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "boot_id": boot_id(),
        "pid_ns": pid_namespace(),
        "started": now,
        "heartbeat": now,
        "runner": runner,
        "kind": kind,
    }


def _same_machine(lock: dict) -> bool:
    """Whether the lock's pid names a process this one can see: same boot, same PID
    namespace (a host name is shared by containers and says nothing)."""
    mine = boot_id(), pid_namespace()
    return all(mine) and (lock.get("boot_id"), lock.get("pid_ns")) == mine


@dataclasses.dataclass(frozen=True)
class StaleRule:
    """When a lock's holder counts as gone: its heartbeat older than `timeout_hours`, its run
    `ended(run_id)` (a committed prepare run), or its Dataflow job in a final state
    (`job_state(lock)`; None: ask Dataflow)."""

    timeout_hours: float = 1.0
    ended: Callable[[str], bool] = lambda run_id: False
    job_state: Callable | None = None


def stale_reason(lock: dict, rule: StaleRule) -> str | None:
    """Why `lock` no longer protects a live run, or None while its run may be alive."""
    timeout_hours, ended, job_state = rule.timeout_hours, rule.ended, rule.job_state
    if ended(lock.get("run_id", "")):
        return "that run has ended"
    if lock.get("job_id"):
        state = job_state(lock) if job_state else None
        if state and state not in FINAL_JOB_STATES:
            return None  # the job itself runs, whatever became of its launcher
        if state:
            return f"its Dataflow job {lock['job_id']} is {state}"
    elif (
        _number(lock.get("pid")) > 0
        and _same_machine(lock)
        and not _process_alive(int(_number(lock["pid"])))
    ):
        return f"its process {lock['pid']} on this machine no longer exists"
    beat = _number(lock.get("heartbeat", lock.get("started")))
    age_hours = (time.time() - beat) / 3600
    if age_hours > timeout_hours:
        return (
            f"its last heartbeat is {age_hours:.2f} h old (--lock_timeout_hours {timeout_hours:g})"
        )
    return None


def _number(value) -> float:
    """A number from a lock file; 0 for anything else (a lock is data, not trusted code)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _describe(output_dir: str, held: dict) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(_number(held.get("started"))))
    job = f", Dataflow job {held['job_id']}" if held.get("job_id") else ""
    kind = held.get("kind") if held.get("kind") in KINDS else PREPARE
    return (
        f"{output_dir} is being written by {kind} {held.get('run_id', '?')} "
        f"(started {started} on {held.get('host', '?')}, pid {held.get('pid', '?')}, "
        f"{held.get('runner', '?')}{job}). Wait for it to end; if it is dead, pass "
        "--takeover_lock."
    )


def acquire(
    output_dir: str,
    run_id: str,
    runner: str,
    *,
    takeover: bool = False,
    stale: StaleRule = StaleRule(),
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
    kind: str = PREPARE,
) -> HeldLock:
    """Takes the folder for `run_id` (a `kind` of run), or raises LockedError naming the
    holder; a holder that `stale` judges gone is taken over with a warning."""
    path, mine = prepared_dir.lock_path(output_dir), _new_record(run_id, runner, kind)
    stale = dataclasses.replace(stale, job_state=stale.job_state or dataflow_job_state)
    for _ in range(3):  # another try only when someone changed the lock meanwhile
        held, version = _load(path)
        if held is not None:
            reason = "--takeover_lock" if takeover else stale_reason(held, stale)
            if reason is None:
                raise LockedError(_describe(output_dir, held))
            print(
                f"warning: taking over the lock of run {held.get('run_id', '?')} on "
                f"{output_dir}: {reason}",
                file=sys.stderr,
            )
        # Only if the lock is still exactly what was judged (absent, or that stale one).
        if lock_store.replace(path, mine, version):
            return HeldLock(output_dir, run_id, heartbeat_seconds)
    raise LockedError(f"{output_dir}: other runs are taking the lock at the same moment; retry.")


def _update_mine(output_dir: str, run_id: str, change) -> None:
    """Applies `change(record) -> new record, or None to delete` while the lock is ours;
    LockLostError when it is not (absent, or another run's)."""
    path = prepared_dir.lock_path(output_dir)
    for _ in range(10):  # retried only when our own heartbeat changed it meanwhile
        held, version = _load(path)
        if (held or {}).get("run_id") != run_id:
            holder = (held or {}).get("run_id", "nobody")
            raise LockLostError(
                f"{output_dir} is now locked by run {holder}; run {run_id} does not commit."
            )
        new = change(held)
        if (
            lock_store.delete(path, version)
            if new is None
            else lock_store.replace(path, new, version)
        ):
            return
    raise LockLostError(f"{output_dir}: the lock of run {run_id} keeps changing under it")


def confirm(output_dir: str, run_id: str) -> None:
    """Before a commit publishes anything: the lock is still ours (its heartbeat refreshed
    by a conditional write), else LockLostError."""
    _update_mine(output_dir, run_id, lambda held: {**held, "heartbeat": time.time()})


def release(output_dir: str, run_id: str) -> None:
    """Removes the lock if `run_id` holds it (a retried release is a no-op; a lock another
    run took meanwhile stays, since the delete is conditional on what was read)."""
    with contextlib.suppress(LockLostError):
        _update_mine(output_dir, run_id, lambda held: None)


class HeldLock:
    """The launcher's handle on the lock it took: heartbeat and Dataflow job id.

    Args:
        output_dir: the folder the lock guards.
        run_id: the run that holds it.
        heartbeat_seconds: how often the heartbeat is refreshed.
    """

    def __init__(self, output_dir: str, run_id: str, heartbeat_seconds: float):
        self.output_dir, self.run_id = output_dir, run_id
        self.heartbeat_seconds = heartbeat_seconds
        self.lost: LockLostError | None = None

    def refresh(self, **fields) -> None:
        _update_mine(
            self.output_dir, self.run_id, lambda held: {**held, **fields, "heartbeat": time.time()}
        )

    def note_job(self, job_id: str, project: str | None, region: str | None) -> None:
        """Records the Dataflow job: the lock then lives while the job runs."""
        self.refresh(job_id=job_id, project=project, region=region)

    @contextlib.contextmanager
    def heartbeat(self):
        """Refreshes the lock every `heartbeat_seconds` in a thread while the block runs."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self._beat, args=(stop,), daemon=True, name=f"lock-heartbeat-{self.run_id}"
        )
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat_seconds):
            try:
                self.refresh()
            except LockLostError as err:  # taken over, or released by the commit
                if read(self.output_dir) is not None:
                    self.lost = err
                    logging.warning("%s", err)
                return
            except Exception as err:  # noqa: BLE001 (a transient store error: next beat)
                logging.warning("lock heartbeat of run %s failed: %s", self.run_id, err)


def job_state_name(state) -> str | None:
    """ "RUNNING" for Dataflow's JOB_STATE_RUNNING enum, Beam's PipelineState.RUNNING or a
    plain "RUNNING"; None for an unknown state (then the heartbeat judges)."""
    name = str(getattr(state, "name", state) or "").rsplit(".", 1)[-1].upper()
    name = name.removeprefix("JOB_STATE_")
    return None if name in ("", "UNKNOWN", "NONE") else name


def dataflow_job_state(lock: dict) -> str | None:
    """The state of the Dataflow job a lock names, e.g. "RUNNING" (None: unknown)."""
    try:  # imported here: Dataflow's API client is only needed for a lock that names a job
        from apache_beam.options.pipeline_options import PipelineOptions
        from apache_beam.runners.dataflow.internal import apiclient

        options = PipelineOptions(project=lock.get("project"), region=lock.get("region"))
        job = apiclient.DataflowApplicationClient(options).get_job(lock["job_id"])
        return job_state_name(job.currentState)
    except Exception as err:  # noqa: BLE001 (no credentials, no API: judged by heartbeat)
        logging.warning("state of Dataflow job %s unknown: %s", lock.get("job_id"), err)
        return None
