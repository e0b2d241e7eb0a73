"""One training run per --output_dir: the chief holds the run folder's lock
(common/run_lock.py, the prepare pipeline's) from before it reads the saved run until it
exits; a second trainer is refused in one line, a dead holder's lock is taken over."""

import json
import os
import subprocess
import time

import keras
import pytest

from common import fs, prepared_dir, run_lock
from tests.trainer.mlm_data import task_args
from tests.trainer.pretraining.test_preemption import same_on_every_backend
from trainer.pretraining import task
from trainer.run_folder import folder_lock

SHORT = ["--train_steps", "2", "--eval_every", "2", "--save_every", "2"]


def _lock_of(pid: int, run_id: str = "t20261126000000abcdef") -> dict:
    """A training run's lock record on this machine, as `run_lock` writes it."""
    now = time.time()
    return {
        "run_id": run_id,
        "host": "here",
        "pid": pid,
        "boot_id": run_lock.boot_id(),
        "pid_ns": run_lock.pid_namespace(),
        "started": now,
        "heartbeat": now,
        "runner": "trainer (tensorflow)",
        "kind": run_lock.TRAINING,
    }


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@same_on_every_backend
def test_a_second_trainer_on_a_held_run_folder_is_refused_in_one_line(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    lock = _lock_of(os.getpid())  # a live process on this machine holds it
    fs.write_json(prepared_dir.lock_path(str(out)), lock)
    assert task.main(task_args(corpus, out, "--seed", "7", *SHORT)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    assert "training run t20261126000000abcdef" in err[0] and "--takeover_lock" in err[0]
    assert sorted(os.listdir(out)) == ["_LOCK"]  # nothing read as a run, nothing written
    assert json.loads((out / "_LOCK").read_text()) == lock


@pytest.mark.slow
def test_the_chief_holds_the_lock_while_it_trains_and_releases_it(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    fs.write_json(prepared_dir.lock_path(str(out)), _lock_of(_dead_pid()))  # a killed run's
    seen = []

    class _ReadLock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(run_lock.read(str(out)))

    task.run(task.parse_args(task_args(corpus, out, *SHORT)), extra_callbacks=[_ReadLock()])
    assert "taking over the lock of run t20261126000000abcdef" in capsys.readouterr().err
    assert seen and all(
        s["pid"] == os.getpid() and s["kind"] == run_lock.TRAINING and s["run_id"].startswith("t")
        for s in seen
    ), seen[:1]
    assert not (out / "_LOCK").exists()
    assert (out / "metrics.json").exists()


@same_on_every_backend
def test_a_run_whose_lock_was_taken_over_stops_before_writing(tmp_path):
    lock = run_lock.acquire(str(tmp_path), "t20261126000000aaaaaa", "test", kind=run_lock.TRAINING)
    lock.lost = run_lock.LockLostError("taken over")
    with pytest.raises(folder_lock.LockLost, match="stops without writing"):
        folder_lock.LockKept(lock).on_epoch_end(0)
    folder_lock.LockKept(None).on_epoch_end(0)  # a non-chief process holds no lock
