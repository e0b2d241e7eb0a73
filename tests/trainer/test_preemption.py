"""Preemption, torn files and changed flags: the trainer killed with SIGKILL at many moments,
restarted each time, ends exactly where the uninterrupted run ends."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.trainer.mlm_data import STEPS, task_args
from trainer import task
from trainer.run_dir import RunDir

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (kill point, the step the next attempt must resume from): see killable_run's docstring.
KILLS = [
    ("mid_interval:25", 0),       # mid-interval, before any file of the run's steps
    ("checkpoint_write:1", 0),    # half of ckpt-40 written
    ("history:2", 40),            # backup 40 committed; history of step 80 written
    ("after_checkpoint:1", 40),   # ckpt-80 published, its backup not
    ("backup_write:1", 40),       # half of the backup of step 80 written
    ("mid_interval:100", 80),     # backup 80 committed, killed inside the last interval
    ("metrics:1", 120),           # everything of step 120 committed but metrics.json
]


def _attempt(kill_at, args):
    return subprocess.run([sys.executable, "-m", "tests.trainer.killable_run", kill_at, *args],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def _weights(path):
    from trainer import checkpoints

    masked_lm, _, _ = checkpoints.load_masked_lm(str(path))
    return masked_lm.get_weights()


def _history(output_dir):
    return json.loads((output_dir / "history.json").read_text())


def test_sigkill_at_many_moments_then_restart_matches_uninterrupted(corpus, full_run, tmp_path):
    out = tmp_path / "run"
    args = task_args(corpus, out, *STEPS, "--keep_checkpoints", "2")
    for kill_at, resume_step in KILLS:
        proc = _attempt(kill_at, args)
        assert proc.returncode == -9, (kill_at, proc.stderr[-3000:])
        assert "skipping unreadable" not in proc.stderr and "Traceback" not in proc.stderr
        backups = RunDir(str(out)).backups()
        newest = int(os.path.basename(backups[0])[6:14]) if backups else 0
        assert newest == resume_step, (kill_at, backups)
    proc = _attempt("none", args)  # the run finished: metrics.json is rebuilt from history
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "already finished 120 steps" in proc.stdout
    assert "skipping unreadable" not in proc.stderr  # no torn file was ever seen
    metrics = json.loads((out / "metrics.json").read_text())
    reference = json.loads((full_run / "metrics.json").read_text())
    assert metrics["steps"] == 120
    np.testing.assert_allclose(metrics["eval_loss"], reference["eval_loss"], rtol=2e-4)
    assert [e["step"] for e in _history(out)] == [40, 80, 120]
    final, expected = _weights(out), _weights(full_run)
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(final, expected))
    assert worst < 2e-4, worst
    leftovers = [n for _, _, files in os.walk(out) for n in files if n.startswith(".tmp-")]
    assert not leftovers and sorted(os.listdir(out / "backup")) == [
        "state-00000080.weights.h5", "state-00000120.weights.h5"]
