"""Gradient accumulation (--grad_accum_steps): N micro-batches of B make the update one batch
of N x B makes, and a run killed half-way through an accumulation resumes exactly."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.trainer.mlm_data import SEQ_LEN, TINY, Preempted, make_tokenizer, preempt_at, write_split
from trainer.pretraining import task
from trainer.run_folder.run_dir import RunDir

pytestmark = pytest.mark.slow  # the fast lane (make test-fast) leaves it to make test

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WORDS = SEQ_LEN - 4  # [CLS] 28 words [SEP] [PAD] [PAD]
# 0.25 x 28 maskable tokens = 7 exactly: every row masks 7 tokens, so each micro-batch's mean
# loss has the same weight in the accumulated mean as its rows have in the big batch's mean.
EQUAL_WEIGHTS = ["--mlm_probability", "0.25"]
NO_DROPOUT = json.dumps({**json.loads(TINY), "dropout": 0.0})


def _rows(num: int, seed: int):
    rng = np.random.default_rng(seed)
    ids = np.zeros((num, SEQ_LEN), np.int64)
    ids[:, 0], ids[:, WORDS + 1] = 2, 3
    starts = rng.integers(0, 95, num)
    ids[:, 1 : WORDS + 1] = 5 + (starts[:, None] + np.arange(WORDS)) % 95
    mask = (np.arange(SEQ_LEN) < WORDS + 2).astype(np.int64)[None].repeat(num, 0)
    return ids, mask


@pytest.fixture(scope="module")
def full_rows(tmp_path_factory):
    root = tmp_path_factory.mktemp("accum")
    info = make_tokenizer(root / "tokenizer")
    write_split(str(root / "train"), *_rows(512, 0), info)
    write_split(str(root / "eval"), *_rows(64, 1), info, num_shards=1, split="validation")
    return root


def _args(root, out, batch: int, accum: int, *extra) -> list[str]:
    return [
        "--train_data",
        str(root / "train"),
        "--eval_data",
        str(root / "eval"),
        "--tokenizer",
        str(root / "tokenizer"),
        "--output_dir",
        str(out),
        "--model",
        "tiny",
        "--config",
        NO_DROPOUT,
        "--strategy",
        "cpu",
        "--learning_rate",
        "1e-2",
        "--per_replica_batch_size",
        str(batch),
        "--grad_accum_steps",
        str(accum),
        "--train_steps",
        "6",
        "--eval_every",
        "3",
        "--save_every",
        "3",
        "--verbose",
        "0",
        *EQUAL_WEIGHTS,
        *extra,
    ]


def _weights(out):
    from trainer.models import model_source

    return model_source.load_masked_lm(str(out))[0].get_weights()


def _worst(a, b) -> float:
    return max(float(np.max(np.abs(x - y))) for x, y in zip(_weights(a), _weights(b)))


@pytest.fixture(scope="module")
def big_batch(full_rows, tmp_path_factory):
    out = tmp_path_factory.mktemp("big")
    assert task.main(_args(full_rows, out, 16, 1)) == 0
    return out


@pytest.fixture(scope="module")
def accumulated(full_rows, tmp_path_factory):
    out = tmp_path_factory.mktemp("accumulated")
    assert task.main(_args(full_rows, out, 4, 4)) == 0
    return out


def test_four_micro_batches_of_4_make_the_update_of_one_batch_of_16(
    big_batch, accumulated, full_rows, tmp_path
):
    worst = _worst(accumulated, big_batch)
    print(f"6 updates, 4 x 4 accumulated vs 16: max |weight difference| = {worst:.3g}")
    assert worst < 1e-5, worst
    config = json.loads((accumulated / "run_config.json").read_text())
    assert config["global_batch_size"] == 16 and config["grad_accum_steps"] == 4
    history = json.loads((accumulated / "history.json").read_text())
    reference = json.loads((big_batch / "history.json").read_text())
    assert [e["step"] for e in history] == [3, 6]
    for got, want in zip(history, reference):  # the schedule and the metrics count updates
        assert got["learning_rate"] == pytest.approx(want["learning_rate"], rel=1e-6)
        assert got["eval_loss"] == pytest.approx(want["eval_loss"], rel=1e-4)
    metrics = json.loads((accumulated / "metrics.json").read_text())
    assert metrics["steps"] == 6 and metrics["examples"] == 96
    # The same 6 updates on batches of 4 without accumulation land elsewhere.
    small = tmp_path / "small"
    assert task.main(_args(full_rows, small, 4, 1)) == 0
    assert _worst(small, big_batch) > 100 * max(worst, 1e-7)


@pytest.mark.skipif(
    keras.backend.backend() == "jax",
    reason="the resume position and update "
    "count are Keras' own on both backends: the kill loop runs on the TensorFlow "
    "pass (CI time); the JAX pass checks accumulation itself",
)
def test_a_kill_half_way_through_an_accumulation_resumes_exactly(accumulated, full_rows, tmp_path):
    args = _args(full_rows, tmp_path, 4, 4)
    killed = subprocess.run(
        [sys.executable, "-m", "tests.trainer.killable_run", "mid_accumulation:4", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert [os.path.basename(p) for p in RunDir(str(tmp_path)).backups()] == [
        "state-00000003.weights.h5"
    ]  # update 4 done, 5 half accumulated, no backup since 3
    assert task.main(args) == 0
    worst = _worst(tmp_path, accumulated)
    print(f"killed mid-accumulation, resumed: max |weight difference| = {worst:.3g}")
    assert worst < 1e-6, worst


def test_two_replicas_accumulating_match_one_batch_too(big_batch, full_rows, tmp_path, capsys):
    """2 replicas x 2 rows x 4 micro-batches: the examples keep their rows, hence their
    masks (trainer/data/splits.py), so the update is again the batch of 16's (DataParallel over two
    CPU devices on JAX). On TensorFlow, Keras' accumulation cannot run under tf.distribute:
    one line, before any file is written."""
    args = _args(full_rows, tmp_path, 2, 4, "--cpu_replicas", "2")
    if keras.backend.backend() == "tensorflow":
        assert task.main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--backend jax" in err[0], err
        assert not os.listdir(tmp_path)
        return
    assert task.main(args) == 0
    config = json.loads((tmp_path / "run_config.json").read_text())
    assert config["replicas"] == 2 and config["global_batch_size"] == 16
    worst = _worst(tmp_path, big_batch)
    print(f"2 replicas x 2 x 4 micro-batches vs 16: max |weight difference| = {worst:.3g}")
    assert worst < 1e-5, worst


@pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="the restore maps Keras' "
    "optimizer variables by name, the same code on both backends: the chain of "
    "four runs goes on the JAX pass, where it is faster (CI time); the TensorFlow "
    "pass has the kill loop above",
)
def test_changing_the_accumulation_at_restarts_restores_step_and_moments(
    big_batch, full_rows, tmp_path, recwarn
):
    """The split of the global batch of 16 changes at each restart (docs/training.md allows
    it): 16 x 1, 8 x 2 micro-batches from step 2, 4 x 4 from step 3, 16 x 1 from step 4.
    The optimizer has one accumulator per weight more, then as many, then fewer than the
    backup it resumes from: Keras alone skips the saved state (step 0, moments lost) or
    reads its micro-batch count as another step (3 x 2 / 4 = step 1). Each restart goes on
    at the backed-up step with the saved moments: the weights are the uninterrupted batch of
    16's (other save/eval intervals do not change them)."""
    splits = [(16, 1, 2), (8, 2, 3), (4, 4, 4), (16, 1, None)]  # (batch, accum, stopped at)
    for batch, accum, stop in splits:
        args = _args(full_rows, tmp_path, batch, accum, "--save_every", "1", "--eval_every", "2")
        if stop is None:
            assert task.main(args) == 0
            continue
        with pytest.raises(Preempted):  # backed up at `stop`, then stopped
            task.run(task.parse_args(args), extra_callbacks=[preempt_at(stop)])
    assert not [w for w in recwarn if "Skipping variable loading" in str(w.message)]
    history = json.loads((tmp_path / "history.json").read_text())
    assert [e["step"] for e in history] == [1, 2, 3, 4, 5, 6]
    attempts = json.loads((tmp_path / "run_config.json").read_text())["attempts"]
    assert [
        (a["start_step"], a["per_replica_batch_size"], a["grad_accum_steps"]) for a in attempts
    ] == [(0, 16, 1), (2, 8, 2), (3, 4, 4), (4, 16, 1)]  # the card's
    worst = _worst(tmp_path, big_batch)
    print(
        f"16 x 1 -> 8 x 2 at 2 -> 4 x 4 at 3 -> 16 x 1 at 4: max |weight difference| = {worst:.3g}"
    )
    assert worst < 1e-5, worst
