"""`python -m trainer.task` reading shards and writing its output on gs:// (local emulator)."""

import json
import os
import subprocess
import sys
import textwrap
import time

import keras
import pytest

from common import run_lock
from tests.trainer.mlm_data import task_args

# gs:// goes through common.fs and tf.io.gfile on both backends: one pass is enough (CI time).
pytestmark = [
    pytest.mark.slow,  # the fast lane (make test-fast) leaves it to make test
    pytest.mark.skipif(
        keras.backend.backend() == "jax", reason="backend-independent; run on the TensorFlow pass"
    ),
]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

UPLOAD = """
import os, sys
from common import fs
local, remote = sys.argv[1:]
for split in ("train", "eval", "tokenizer"):
    for name in sorted(os.listdir(os.path.join(local, split))):
        with open(os.path.join(local, split, name), "rb") as f:
            fs.write_bytes(fs.join(remote, split, name), f.read())
"""


def _run(args, env, status=0):
    proc = subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=400
    )
    assert proc.returncode == status, proc.stderr[-3000:]
    return proc.stdout if status == 0 else proc.stderr


def test_train_from_and_to_gcs(gcs, corpus):
    env = {**os.environ, **gcs.env}
    _run(["-c", textwrap.dedent(UPLOAD), str(corpus["root"]), gcs.url("data")], env)
    remote = {
        "train": gcs.url("data", "train"),
        "eval": gcs.url("data", "eval"),
        "tokenizer": gcs.url("data", "tokenizer"),
    }
    _run(
        [
            "-m",
            "trainer.task",
            *task_args(
                remote,
                gcs.url("run"),
                "--train_steps",
                "20",
                "--eval_every",
                "10",
                "--save_every",
                "10",
            ),
        ],
        env,
    )
    names = gcs.object_names("run/")
    for expected in (
        "run/run_config.json",
        "run/metrics.json",
        "run/history.json",
        "run/tokenizer/tokenizer.json",
        "run/checkpoints/ckpt-00000020.weights.h5",
        "run/backup/state-00000020.weights.h5",
    ):
        assert expected in names, names
    assert any(n.startswith("run/logs/train/events.out.tfevents") for n in names)
    metrics = json.loads(gcs.read_object("run/metrics.json"))
    assert metrics["steps"] == 20 and metrics["eval_loss"] > 0
    # Extending the run resumes from the backup on gs:// (read back through the emulator).
    _run(
        [
            "-m",
            "trainer.task",
            *task_args(
                remote,
                gcs.url("run"),
                "--train_steps",
                "30",
                "--eval_every",
                "10",
                "--save_every",
                "10",
            ),
        ],
        env,
    )
    names = gcs.object_names("run/backup/")
    assert names == [
        "run/backup/state-00000020.weights.h5",
        "run/backup/state-00000030.weights.h5",
    ], names
    history = json.loads(gcs.read_object("run/history.json"))
    assert [e["step"] for e in history] == [10, 20, 30]
    # The run folder's lock (common/run_lock.py, a conditional write on gs://): released at
    # the end, and a live training run's lock refuses a second trainer in one line.
    assert "run/_LOCK" not in gcs.object_names("run/")
    live = {
        "run_id": "t20261126000000abcdef",
        "pid": os.getpid(),
        "kind": "training run",
        "boot_id": run_lock.boot_id(),
        "pid_ns": run_lock.pid_namespace(),
        "started": time.time(),
        "heartbeat": time.time(),
    }
    gcs.write_object("run/_LOCK", json.dumps(live).encode())
    err = _run(
        [
            "-m",
            "trainer.task",
            *task_args(remote, gcs.url("run"), "--train_steps", "40", "--seed", "7"),
        ],
        env,
        status=2,
    )
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error:") and "training run t20261126000000abcdef" in lines[-1]
    assert "traceback" not in err.lower()
    assert json.loads(gcs.read_object("run/_LOCK")) == live
