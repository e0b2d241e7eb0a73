"""Preemption, torn files and changed flags: the trainer killed with SIGKILL at many moments,
restarted each time, ends exactly where the uninterrupted run ends."""

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.trainer.mlm_data import STEPS, Preempted, preempt_at, task_args
from trainer.pretraining import task
from trainer.run_folder.run_dir import RunDir

pytestmark = pytest.mark.slow  # the fast lane (make test-fast) leaves it to make test

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# (kill point, the step the next attempt must resume from): see killable_run's docstring.
# A kill inside an interval with no file being written (`mid_interval`) is the ModernBERT
# trainer's test (tests/trainer/families/test_modernbert_trainer.py); here the file writes.
KILLS = [
    ("checkpoint_write:1", 0),  # half of ckpt-40 written
    ("history:2", 40),  # backup 40 committed; history of step 80 written
    ("after_checkpoint:1", 40),  # ckpt-80 published, its backup not
    ("backup_write:1", 40),  # half of the backup of step 80 written
    ("metrics:1", 120),  # everything of step 120 committed but metrics.json
]
# The kill points are the trainer's own (file writes, interval ends), not the backend's: the
# full loop runs on TensorFlow; the JAX pass (CI time) keeps one: half-way through the backup
# of step 80 (resumes from the backup of step 40, mid-run).
if keras.backend.backend() == "jax":
    KILLS = [("backup_write:2", 40)]

# Plan arithmetic and file handling that run the same code whatever the backend: the JAX
# pass leaves them to the TensorFlow pass (CI time).
same_on_every_backend = pytest.mark.skipif(
    keras.backend.backend() == "jax", reason="backend-independent; run on the TensorFlow pass"
)


def _attempt(kill_at, args):
    return subprocess.run(
        [sys.executable, "-m", "tests.trainer.killable_run", kill_at, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _weights(path):
    from trainer.models import model_source

    masked_lm, _, _ = model_source.load_masked_lm(str(path))
    return masked_lm.get_weights()


def _history(output_dir):
    return json.loads((output_dir / "history.json").read_text())


def test_sigkill_at_many_moments_then_restart_matches_uninterrupted(
    corpus, full_run, tmp_path, capsys
):
    out = tmp_path / "run"
    args = task_args(corpus, out, *STEPS, "--keep_checkpoints", "2")
    for kill_at, resume_step in KILLS:
        proc = _attempt(kill_at, args)
        assert proc.returncode == -9, (kill_at, proc.stderr[-3000:])
        assert "skipping unreadable" not in proc.stderr and "Traceback" not in proc.stderr
        backups = RunDir(str(out)).backups()
        newest = int(os.path.basename(backups[0])[6:14]) if backups else 0
        assert newest == resume_step, (kill_at, backups)
    # The last restart needs no kill point: the same command, in this process (a fresh one
    # would only add the start-up).
    capsys.readouterr()
    assert task.main(args) == 0
    finished = capsys.readouterr()
    if KILLS[-1][1] == 120:  # the run had finished: metrics.json is rebuilt from history
        assert "already finished 120 steps" in finished.out
    assert "skipping unreadable" not in finished.err  # no torn file was ever seen
    metrics = json.loads((out / "metrics.json").read_text())
    reference = json.loads((full_run / "metrics.json").read_text())
    assert metrics["steps"] == 120
    np.testing.assert_allclose(metrics["eval_loss"], reference["eval_loss"], rtol=2e-4)
    assert [e["step"] for e in _history(out)] == [40, 80, 120]
    final, expected = _weights(out), _weights(full_run)
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(final, expected))
    print(f"after {len(KILLS)} kills: max |weight difference| vs uninterrupted = {worst:.3g}")
    assert worst < 2e-4, worst
    leftovers = [n for _, _, files in os.walk(out) for n in files if n.startswith(".tmp-")]
    assert not leftovers and sorted(os.listdir(out / "backup")) == [
        "state-00000080.weights.h5",
        "state-00000120.weights.h5",
    ]


@same_on_every_backend
def test_resume_with_another_eval_and_save_interval_is_exact(corpus, full_run, tmp_path):
    with pytest.raises(Preempted):
        task.run(
            task.parse_args(task_args(corpus, tmp_path, *STEPS)), extra_callbacks=[preempt_at(40)]
        )
    changed = task_args(
        corpus, tmp_path, "--train_steps", "120", "--eval_every", "20", "--save_every", "30"
    )
    assert task.main(changed) == 0
    history = _history(tmp_path)
    assert [e["step"] for e in history] == [40, 50, 60, 70, 80, 90, 100, 110, 120]
    assert [e["step"] for e in history if "eval_loss" in e] == [40, 60, 80, 100, 120]
    assert sorted(os.listdir(tmp_path / "checkpoints")) == [
        "ckpt-00000060.weights.h5",
        "ckpt-00000090.weights.h5",
        "ckpt-00000120.weights.h5",
    ]
    final, expected = _weights(tmp_path), _weights(full_run)
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(final, expected))
    print(f"resumed with other intervals: max |weight difference| = {worst:.3g}")
    assert worst < 2e-4, worst


def _copy_of(full_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(full_run, out)
    return out


@same_on_every_backend
def test_extending_train_steps_replans_the_decay_without_a_second_warmup(
    corpus, full_run, tmp_path
):
    out = _copy_of(full_run, tmp_path)
    longer = task_args(
        corpus, out, "--train_steps", "200", "--eval_every", "40", "--save_every", "40"
    )
    assert task.main(longer) == 0
    history = _history(out)
    assert [e["step"] for e in history] == [40, 80, 120, 160, 200]
    warmup = json.loads((out / "run_config.json").read_text())["warmup_steps"]
    assert warmup == 6  # 5 % of the first plan's 120 steps, kept
    peak = 1e-2
    assert history[3]["learning_rate"] == pytest.approx(peak * 40 / (200 - warmup), rel=1e-4)
    assert history[4]["learning_rate"] == 0.0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 200


@pytest.mark.parametrize(
    "change, expected",
    [
        (["--train_steps", "80"], "already trained 120 steps"),
        (["--train_steps", "120", "--seed", "7"], "flag: --seed"),
        (["--train_steps", "120", "--per_replica_batch_size", "8"], "global_batch_size"),
        # The data order and the objective from the resume step on.
        (["--train_steps", "160", "--shuffle_buffer_size", "100"], "flag: --shuffle_buffer_size"),
        (["--train_steps", "160", "--masking", "span"], "flag: --masking"),
        (["--train_steps", "160", "--mlm_probability", "0.2"], "flag: --mlm_probability"),
    ],
)
def test_changes_that_cannot_continue_are_one_line(
    corpus, full_run, tmp_path, capsys, change, expected
):
    out = _copy_of(full_run, tmp_path)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    args = task_args(corpus, out, "--eval_every", "40", "--save_every", "40")
    i = args.index("--per_replica_batch_size")
    if "--per_replica_batch_size" in change:
        del args[i : i + 2]
    assert task.main(args + change) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_resuming_on_the_other_backend_is_refused_with_one_line(corpus, full_run, tmp_path):
    """Dropout's random streams differ between backends, so a resume there could not be
    exact: it is refused, naming the flag, and changes no file."""
    out = _copy_of(full_run, tmp_path)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    other = {"jax": "tensorflow", "tensorflow": "jax"}[keras.backend.backend()]
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.task", "--backend", other, *task_args(corpus, out, *STEPS)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "another backend" in errors[0] and "flag: --backend" in errors[0]
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def _truncate(path):
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 3])


def test_torn_backups_fall_back_to_older_state_then_checkpoint(corpus, full_run, tmp_path, capsys):
    out = _copy_of(full_run, tmp_path)
    run = RunDir(str(out))
    args = task_args(
        corpus, out, "--train_steps", "160", "--eval_every", "40", "--save_every", "40"
    )
    _truncate(run.backup(120))
    assert task.main(args) == 0  # resumes from the backup of step 80
    err = capsys.readouterr().err
    assert "skipping unreadable backup" in err and "state-00000120" in err
    assert [e["step"] for e in _history(out)] == [40, 80, 120, 160]
    for path in run.backups():
        _truncate(path)
    args[args.index("160")] = "200"
    assert task.main(args) == 0  # no readable backup: the newest checkpoint (160)
    assert "resuming from" in capsys.readouterr().err
    assert [e["step"] for e in _history(out)][-2:] == [160, 200]
    for path in run.backups() + run.checkpoints():
        _truncate(path)
    args[args.index("200")] = "240"
    assert task.main(args) == 2
    assert "no checkpoint that can be read" in capsys.readouterr().err.splitlines()[-1]


def test_resume_on_two_replicas_at_the_same_global_batch(corpus, tmp_path):
    with pytest.raises(Preempted):
        task.run(
            task.parse_args(
                task_args(
                    corpus,
                    tmp_path,
                    "--train_steps",
                    "60",
                    "--eval_every",
                    "30",
                    "--save_every",
                    "30",
                )
            ),
            extra_callbacks=[preempt_at(30)],
        )
    two = task_args(
        corpus,
        tmp_path,
        "--train_steps",
        "60",
        "--eval_every",
        "30",
        "--save_every",
        "30",
        "--cpu_replicas",
        "2",
        "--per_replica_batch_size",
        "8",
    )
    i = two.index("--per_replica_batch_size")
    del two[i : i + 2]  # the 16 of task_args; 8 per replica below
    assert task.main(two) == 0
    run_config = json.loads((tmp_path / "run_config.json").read_text())
    assert run_config["replicas"] == 2 and run_config["global_batch_size"] == 16
    assert [e["step"] for e in _history(tmp_path)] == [30, 60]


def test_a_non_chief_process_writes_nothing(corpus, tmp_path, monkeypatch):
    import dataclasses

    from trainer import backends

    setup = backends.setup
    monkeypatch.setattr(backends, "setup", lambda c: dataclasses.replace(setup(c), chief=False))
    out = tmp_path / "worker1"
    metrics = task.run(
        task.parse_args(
            task_args(
                corpus, out, "--train_steps", "20", "--eval_every", "10", "--save_every", "10"
            )
        )
    )
    assert metrics["steps"] == 20
    assert not out.exists() or not any(out.rglob("*")), list(out.rglob("*"))


def test_sigterm_mid_save_removes_the_temporary_weights(corpus, tmp_path):
    """SIGTERM while a checkpoint's weights sit in a temporary file: the
    run exits with 143 and leaves nothing in TMPDIR (before, the full weights file stayed)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.trainer.killable_run",
            "checkpoint_term:1",
            *task_args(
                corpus, out, "--train_steps", "40", "--eval_every", "40", "--save_every", "20"
            ),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert proc.returncode == 143, proc.stderr[-3000:]
    assert "SIGTERM" in proc.stderr.strip().splitlines()[-1]
    assert not list(tmp.iterdir())
    assert not list(out.rglob(".tmp-*")) and not list((out / "checkpoints").glob("*"))


@same_on_every_backend
def test_a_preemption_sync_point_backs_up_its_step_then_stops(corpus, tmp_path, monkeypatch):
    """The callback on one process (the pod test sends the real SIGTERM and
    resumes to the uninterrupted weights): the sync point reached mid-interval writes the
    backup of that step; reached at an interval's last call, the stop waits for the step's
    history, checkpoint and backup; each attempt stops like a SIGTERM."""
    import dataclasses

    from common.errors import Terminated
    from trainer import backends

    setup, stop_at = backends.setup, {"call": 0}
    monkeypatch.setattr(
        backends,
        "setup",
        lambda c: dataclasses.replace(setup(c), preemption_sync=lambda n: n == stop_at["call"]),
    )
    out = tmp_path / "run"
    args = task_args(
        corpus,
        out,
        "--train_steps",
        "20",
        "--eval_every",
        "10",
        "--save_every",
        "10",
        "--max_eval_batches",
        "1",
    )
    for call, step in [(3, 3), (7, 10)]:  # calls count from 1 in each attempt
        stop_at["call"] = call
        with pytest.raises(Terminated, match=f"stopped at step {step}"):
            task.run(task.parse_args(args))
        assert RunDir(str(out)).backups()[0].endswith(f"state-{step:08d}.weights.h5")
    assert [e["step"] for e in _history(out)] == [10] and "eval_loss" in _history(out)[0]
    assert sorted(os.listdir(out / "checkpoints")) == ["ckpt-00000010.weights.h5"]
    assert sorted(os.listdir(out / "backup")) == [
        "state-00000003.weights.h5",
        "state-00000010.weights.h5",
    ]
