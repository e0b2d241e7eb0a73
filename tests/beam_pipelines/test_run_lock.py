"""The output lock under races, on a local folder and on GCS (the emulator honours
`ifGenerationMatch` as GCS does): two takeovers of one stale lock, a release racing a
takeover, a live run in another PID namespace, a heartbeat, a Dataflow job's state."""

import json
import os
import threading

import pytest

from common import fs, prepared_dir, run_lock

RUN_A, RUN_B = "r20261124000000aaaaaa", "r20261124000000bbbbbb"


@pytest.fixture(params=["local", "gcs"])
def where(request, tmp_path):
    """(output folder, the function every read of the lock goes through)."""
    if request.param == "local":
        return str(tmp_path / "out"), (fs, "read_bytes")
    gcs = request.getfixturevalue("gcs")
    gcs.apply_env()
    return gcs.url("out"), (run_lock, "_load")


def _rewrite(out, **changes):
    """Edits the lock behind its holder's back (an unconditional write)."""
    record = json.loads(fs.read_bytes(prepared_dir.lock_path(out)))
    fs.write_bytes(prepared_dir.lock_path(out), json.dumps({**record, **changes}).encode())


def _stale(out):
    _rewrite(out, started=0.0, heartbeat=0.0, pid=None)


def _hook(monkeypatch, target, after_read):
    """Calls `after_read()` once per arming, right after a read of the lock returns."""
    module, name = target
    real = getattr(module, name)

    def wrapped(path, *args, **kwargs):
        result = real(path, *args, **kwargs)
        if path.endswith(prepared_dir.LOCK):
            after_read()
        return result

    monkeypatch.setattr(module, name, wrapped)


def test_two_takeovers_of_a_stale_lock_one_wins(where, monkeypatch):
    out, target = where
    run_lock.acquire(out, "r20261124000000dead00", "FnApiRunner")
    _stale(out)
    second_read, first_done = threading.Event(), threading.Event()

    def after_read():
        # The second launcher read the stale lock, then waits until the first took it
        # over; it then decides on what it read (a slow launcher).
        if threading.current_thread().name == "second" and not second_read.is_set():
            second_read.set()
            first_done.wait(10)

    _hook(monkeypatch, target, after_read)
    outcome = {}

    def launch(run_id):
        name = threading.current_thread().name
        if name == "first":
            second_read.wait(10)
        try:
            run_lock.acquire(out, run_id, "FnApiRunner")
            outcome[name] = "acquired"
        except run_lock.LockedError as err:
            outcome[name] = str(err)
        finally:
            if name == "first":
                first_done.set()

    threads = [
        threading.Thread(target=launch, args=(run_id,), name=name)
        for name, run_id in (("first", RUN_A), ("second", RUN_B))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert outcome["first"] == "acquired"
    assert "being written by prepare run " + RUN_A in outcome["second"], outcome
    assert run_lock.read(out)["run_id"] == RUN_A


def test_a_release_racing_a_takeover_keeps_the_new_owner(where, monkeypatch):
    out, target = where
    run_lock.acquire(out, RUN_A, "FnApiRunner")
    _stale(out)
    armed = [True]

    def after_read():  # A read its own lock; B takes it over before A deletes it
        if armed and armed.pop():
            run_lock.acquire(out, RUN_B, "FnApiRunner")

    _hook(monkeypatch, target, after_read)
    run_lock.release(out, RUN_A)
    assert run_lock.read(out)["run_id"] == RUN_B
    with pytest.raises(run_lock.LockLostError, match=RUN_B):
        run_lock.confirm(out, RUN_A)  # what the commit of A checks first
    run_lock.confirm(out, RUN_B)
    run_lock.release(out, RUN_B)
    assert run_lock.read(out) is None


def test_a_live_run_in_another_pid_namespace_keeps_its_lock(tmp_path):
    out = str(tmp_path / "out")
    run_lock.acquire(out, RUN_A, "FnApiRunner")
    # Same host name, a pid that does not exist here: a container's launcher.
    _rewrite(out, pid=2**22 + 12345, pid_ns="pid:[4026531000]")
    with pytest.raises(run_lock.LockedError, match=RUN_A):
        run_lock.acquire(out, RUN_B, "FnApiRunner")
    _rewrite(out, pid_ns=run_lock.pid_namespace(), boot_id="another-boot")  # rebooted
    with pytest.raises(run_lock.LockedError, match=RUN_A):
        run_lock.acquire(out, RUN_B, "FnApiRunner")
    _rewrite(out, boot_id=run_lock.boot_id())  # this machine, this boot: truly dead
    run_lock.acquire(out, RUN_B, "FnApiRunner")
    assert run_lock.read(out)["run_id"] == RUN_B


def test_the_heartbeat_keeps_a_long_run_live(where, capsys):
    out, _ = where
    held = run_lock.acquire(out, RUN_A, "FnApiRunner", heartbeat_seconds=0.2)
    with held.heartbeat():
        threading.Event().wait(3)  # longer than --lock_timeout_hours below
        with pytest.raises(run_lock.LockedError, match=RUN_A):
            run_lock.acquire(out, RUN_B, "FnApiRunner", stale=run_lock.StaleRule(2 / 3600))
    _rewrite(out, pid=None)  # the heartbeat stopped: only its age is left to judge by
    threading.Event().wait(2.5)
    run_lock.acquire(out, RUN_B, "FnApiRunner", stale=run_lock.StaleRule(2 / 3600))
    assert "last heartbeat" in capsys.readouterr().err


def test_a_running_dataflow_job_keeps_its_lock(where, capsys):
    out, _ = where
    held = run_lock.acquire(out, RUN_A, "DataflowRunner")
    held.note_job("2026-11-24_01_02_03-123", "proj", "europe-west4")
    # The launcher is gone (a dead pid on this machine) and its heartbeat is old.
    _rewrite(out, heartbeat=0.0, started=0.0, pid=2**22 + 12345)
    seen = []

    def running(lock):
        seen.append((lock["job_id"], lock["project"], lock["region"]))
        return "RUNNING"

    with pytest.raises(run_lock.LockedError, match="2026-11-24_01_02_03-123"):
        run_lock.acquire(out, RUN_B, "FnApiRunner", stale=run_lock.StaleRule(job_state=running))
    assert seen == [("2026-11-24_01_02_03-123", "proj", "europe-west4")]
    run_lock.acquire(
        out, RUN_B, "FnApiRunner", stale=run_lock.StaleRule(job_state=lambda lock: "FAILED")
    )
    assert "FAILED" in capsys.readouterr().err
    assert run_lock.read(out)["run_id"] == RUN_B


def test_a_folder_name_with_glob_characters_is_literal(where):
    out, _ = where
    out = out + "/prep[ab]"
    run_lock.acquire(out, RUN_A, "FnApiRunner")
    run_lock.release(out, RUN_A)
    assert run_lock.read(out) is None
    run_lock.acquire(out, RUN_B, "FnApiRunner")  # no lock left behind


def test_job_state_names_from_every_source():
    import enum

    class JobStateValueValuesEnum(enum.Enum):  # the shape of Dataflow's API enum
        JOB_STATE_RUNNING = 2
        JOB_STATE_FAILED = 6
        JOB_STATE_UNKNOWN = 0

    names = [
        run_lock.job_state_name(s)
        for s in (
            JobStateValueValuesEnum.JOB_STATE_RUNNING,
            JobStateValueValuesEnum.JOB_STATE_FAILED,
            JobStateValueValuesEnum.JOB_STATE_UNKNOWN,
            "PipelineState.DONE",
            "CANCELLED",
            None,
        )
    ]
    assert names == ["RUNNING", "FAILED", None, "DONE", "CANCELLED", None]
    assert {"FAILED", "DONE", "CANCELLED"} <= set(run_lock.FINAL_JOB_STATES)


class _FakeDataflowResult:
    """What `Pipeline.run()` returns on Dataflow, for a job that fails after submission."""

    def __init__(self, seen_lock):
        self.seen_lock, self.state = seen_lock, "RUNNING"

    def job_id(self):
        return "2026-11-24_job-7"

    def wait_until_finish(self):
        self.seen_lock.append(run_lock.read(self.out))  # while the job runs
        self.state = "FAILED"
        raise RuntimeError("Dataflow job 2026-11-24_job-7 failed")


def test_the_launcher_records_the_job_and_a_failed_job_frees_the_lock(tmp_path, monkeypatch):
    import types

    from apache_beam.options.pipeline_options import PipelineOptions

    from beam_pipelines import prepare

    out, seen = str(tmp_path / "out"), []
    result = _FakeDataflowResult(seen)
    result.out = out
    # No job is submitted: the pipeline object only hands back the job's result.
    monkeypatch.setattr(
        prepare.beam, "Pipeline", lambda options: types.SimpleNamespace(run=lambda: result)
    )
    monkeypatch.setattr(prepare, "build", lambda *args, **kwargs: None)
    held = run_lock.acquire(out, RUN_A, "DataflowRunner")
    options = PipelineOptions(["--project", "proj", "--region", "europe-west4"])
    with pytest.raises(RuntimeError, match="job-7 failed"):
        settings = types.SimpleNamespace(flags=types.SimpleNamespace(output_dir=out))
        prepare._run_on_dataflow(options, settings, None, RUN_A, {}, [], held)
    assert seen[0]["job_id"] == "2026-11-24_job-7" and seen[0]["region"] == "europe-west4"
    assert run_lock.read(out) is None  # a failed job never commits: its launcher released


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[1, 2]",
        json.dumps({"run_id": RUN_A, "pid": "x", "heartbeat": "nan", "started": None}).encode(),
    ],
)
def test_a_garbled_lock_is_stale_not_a_traceback(tmp_path, capsys, content):
    out = str(tmp_path / "out")
    os.makedirs(out)
    with open(prepared_dir.lock_path(out), "wb") as f:
        f.write(content)
    run_lock.acquire(out, RUN_B, "FnApiRunner")
    assert run_lock.read(out)["run_id"] == RUN_B
    assert "taking over the lock" in capsys.readouterr().err
