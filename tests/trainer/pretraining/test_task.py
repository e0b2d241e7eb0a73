"""End to end: the CLI trains a tiny model, writes the output contract, resumes exactly after
an interruption, runs under MirroredStrategy, and rejects bad input with one line."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.trainer.mlm_data import STEPS, Preempted, preempt_at, task_args
from trainer.pretraining import task

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _history(output_dir):
    return json.loads((output_dir / "history.json").read_text())


@pytest.mark.slow
def test_eval_loss_falls_clearly(full_run):
    evals = [e["eval_loss"] for e in _history(full_run) if "eval_loss" in e]
    assert len(evals) == 3
    assert evals[-1] < evals[0] - 0.5, evals
    # Well below guessing among the 95 words (log 95 = 4.55). 120 steps end anywhere in
    # 3.06-3.94 depending on the seed (seeds 1, 2, 3, 42 on both backends, with the stream
    # of trainer/data/data_order.py): some seeds are still leaving the unigram plateau (~3.9).
    assert evals[-1] < np.log(95) - 0.5
    metrics = json.loads((full_run / "metrics.json").read_text())
    assert metrics["steps"] == 120 and metrics["eval_loss"] == evals[-1]
    assert metrics["eval_perplexity"] == pytest.approx(np.exp(evals[-1]), rel=1e-4)
    assert 0 < metrics["eval_accuracy"] <= 1 and metrics["examples_per_second"] > 0


@pytest.mark.slow
def test_output_dir_follows_the_export_contract(full_run, corpus):
    from trainer.models.model import build_masked_lm
    from trainer.run_folder.run_record import RunRecord

    run_config = json.loads((full_run / "run_config.json").read_text())
    assert run_config["family"] == "roberta" and run_config["size"] == "tiny"
    assert run_config["max_length"] == 32 and run_config["seed"] == 42
    assert run_config["tokenizer"] == corpus["info"].to_dict()
    assert run_config["backbone_config"]["hidden_dim"] == 64
    assert sorted(os.listdir(full_run / "tokenizer")) == [
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert sorted(os.listdir(full_run / "checkpoints")) == [  # keep_checkpoints 2
        "ckpt-00000080.weights.h5",
        "ckpt-00000120.weights.h5",
    ]
    assert os.listdir(full_run / "logs" / "train") and os.listdir(full_run / "logs" / "validation")
    assert sorted(os.listdir(full_run / "backup")) == [  # the newest two
        "state-00000080.weights.h5",
        "state-00000120.weights.h5",
    ]
    steps = [e["step"] for e in _history(full_run)]
    assert steps == [40, 80, 120]
    assert {"loss", "accuracy", "perplexity", "learning_rate", "examples_per_second"} <= set(
        _history(full_run)[0]
    )

    record = RunRecord.read(str(full_run / "run_config.json"))
    masked_lm = build_masked_lm(record.family, record.backbone_config)
    fresh = masked_lm.get_weights()
    masked_lm.load_weights(str(full_run / "checkpoints" / "ckpt-00000120.weights.h5"))
    changed = [not np.allclose(a, b) for a, b in zip(fresh, masked_lm.get_weights())]
    assert sum(changed) > len(changed) // 2


class _Iterations(keras.callbacks.Callback):
    """The optimizer's step when `fit` returns: what metrics.json must report."""

    def on_train_end(self, logs=None):
        self.value = int(self.model.optimizer.iterations.numpy())


@pytest.mark.slow
def test_interrupted_run_resumes_where_it_stopped(full_run, corpus, tmp_path):
    args = task_args(corpus, tmp_path, *STEPS, "--keep_checkpoints", "2")
    with pytest.raises(Preempted):
        task.run(task.parse_args(args), extra_callbacks=[preempt_at(40)])
    assert [e["step"] for e in _history(tmp_path)] == [40]
    seen = _Iterations()
    metrics = task.run(task.parse_args(args), extra_callbacks=[seen])  # the same command again
    assert metrics["steps"] == seen.value == 120 and metrics["examples"] == 120 * 16
    resumed, uninterrupted = _history(tmp_path), _history(full_run)
    assert [e["step"] for e in resumed] == [40, 80, 120]
    for key in ("loss", "eval_loss", "learning_rate"):
        np.testing.assert_allclose(
            [e[key] for e in resumed], [e[key] for e in uninterrupted], rtol=2e-4, err_msg=key
        )
    # Running the finished command once more changes nothing.
    before = (tmp_path / "metrics.json").read_text()
    assert task.main(args) == 0 and (tmp_path / "metrics.json").read_text() == before


def _two_replica_args(corpus, out, steps="40"):
    args = task_args(
        corpus,
        out,
        "--train_steps",
        steps,
        "--eval_every",
        "20",
        "--save_every",
        "20",
        "--cpu_replicas",
        "2",
    )
    i = args.index("--per_replica_batch_size")
    args[i + 1] = "8"  # global batch 16, as the one-replica runs
    return args


@pytest.mark.slow
def test_two_replicas_over_two_cpu_devices(corpus, tmp_path):
    """MirroredStrategy over two logical CPUs (TensorFlow), DataParallel over two CPU
    devices (JAX, XLA_FLAGS=--xla_force_host_platform_device_count=2 in conftest)."""
    metrics = task.run(task.parse_args(_two_replica_args(corpus, tmp_path)))
    run_config = json.loads((tmp_path / "run_config.json").read_text())
    assert run_config["replicas"] == 2 and run_config["global_batch_size"] == 16
    assert run_config["backend"] == keras.backend.backend()
    # keras#19005: no jit under MirroredStrategy on CPUs (the masks are the same without it).
    assert run_config["jit_compile"] is (keras.backend.backend() == "jax")
    evals = [e["eval_loss"] for e in _history(tmp_path) if "eval_loss" in e]
    # Trains without diverging. Not "falls from step 20 to 40": 40 steps are still on the
    # plateau for some stream orders (4.366 -> 4.400 seen in CI; 4.49-4.60 at step 40 over
    # four seeds); that it learns is test_eval_loss_falls_clearly's, at 120 steps.
    assert np.isfinite(evals).all() and evals[-1] < evals[0] + 0.1
    assert metrics["steps"] == 40


@pytest.mark.slow
@pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="TensorFlow averages per-replica means: close, not equal",
)
def test_two_devices_give_the_one_device_result_at_the_same_global_batch(corpus, tmp_path):
    """JAX computes one global step whatever the device count: same examples (rows), same
    masks (keyed by global row), same dropout, so the same weights up to summation order."""
    from trainer.models import model_source

    one = task_args(
        corpus, tmp_path / "one", "--train_steps", "20", "--eval_every", "20", "--save_every", "20"
    )
    assert task.main(one) == 0
    assert task.main(_two_replica_args(corpus, tmp_path / "two", "20")) == 0
    weights = [
        model_source.load_masked_lm(str(tmp_path / name))[0].get_weights()
        for name in ("one", "two")
    ]
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(*weights))
    print(f"2 devices vs 1: max |weight difference| = {worst:.3g}")
    assert worst < 1e-4, worst


@pytest.mark.slow
@pytest.mark.parametrize("masking", ["whole_word", "span"])
def test_whole_word_and_span_masking_train(corpus, tmp_path, masking):
    args = task_args(
        corpus,
        tmp_path,
        "--train_steps",
        "40",
        "--eval_every",
        "20",
        "--save_every",
        "40",
        "--masking",
        masking,
    )
    metrics = task.run(task.parse_args(args))
    run_config = json.loads((tmp_path / "run_config.json").read_text())
    assert run_config["masking"] == masking
    evals = [e["eval_loss"] for e in _history(tmp_path) if "eval_loss" in e]
    # Trains without diverging. Not "falls from step 20 to 40": 40 steps are still on the
    # plateau for some stream orders (4.366 -> 4.400 seen in CI; 4.49-4.60 at step 40 over
    # four seeds); that it learns is test_eval_loss_falls_clearly's, at 120 steps.
    assert np.isfinite(evals).all() and evals[-1] < evals[0] + 0.1
    assert metrics["steps"] == 40


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "trainer.task", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.slow
def test_cli_rejects_incomplete_data_with_one_line(corpus, tmp_path):
    from tests.trainer.mlm_data import repetitive_sequences, write_split

    bad = tmp_path / "unfinished"
    write_split(str(bad), *repetitive_sequences(64, seed=0), corpus["info"], committed=False)
    args = task_args(corpus, tmp_path / "out", "--train_steps", "5")
    args[args.index("--train_data") + 1] = str(bad)
    proc = _cli(*args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "no manifest.json" in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.parametrize("problem", ["length", "tokenizer", "output_dir"])
def test_mismatches_exit_2_with_one_line(corpus, tmp_path, capsys, problem):
    from tests.trainer.mlm_data import make_tokenizer

    args = task_args(corpus, tmp_path / "out", "--train_steps", "5")
    if problem == "length":
        args += ["--max_length", "64"]
        expected = "length 32, but 64"
    elif problem == "tokenizer":
        (tmp_path / "tok").mkdir()
        make_tokenizer(tmp_path / "tok")
        (tmp_path / "tok" / "tokenizer.json").write_text(
            (tmp_path / "tok" / "tokenizer.json").read_text().replace('"w1"', '"w1x"')
        )
        args[args.index("--tokenizer") + 1] = str(tmp_path / "tok")
        expected = "another tokenizer"
    else:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "run_config.json").write_text(
            json.dumps(
                {
                    "family": "bert",
                    "backbone_config": {},
                    "max_length": 32,
                    "tokenizer": {},
                    "seed": 42,
                }
            )
        )
        # a run that saved weights (one that saved none binds nothing: a corrected command
        # starts it afresh, tests/trainer/families/test_modernbert_bounds.py)
        (tmp_path / "out" / "backup").mkdir()
        (tmp_path / "out" / "backup" / "state-00000005.weights.h5").write_bytes(b"")
        expected = "holds a run with another family"
    assert task.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err


def test_tokenizer_defaults_to_the_manifest_and_legacy_format_needs_it(corpus, tmp_path, capsys):
    args = task_args(corpus, tmp_path / "out", "--train_steps", "5")
    i = args.index("--tokenizer")
    del args[i : i + 2]
    # The test corpus's manifest records no tokenizer path, like legacy-format shards.
    assert task.main(args) == 2
    assert "pass --tokenizer" in capsys.readouterr().err


@pytest.mark.slow
def test_a_cpu_run_shows_no_cuda_noise(corpus, tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_VISIBLE_DEVICES", "TF_CPP_MIN_LOG_LEVEL")
    }
    proc = _cli(
        *task_args(
            corpus, tmp_path / "out", "--train_steps", "4", "--eval_every", "4", "--save_every", "4"
        ),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    output = proc.stdout + proc.stderr
    for noise in (
        "E0000",
        "cuInit",
        "cuda drivers",
        "cpu_feature_guard",
        "absl::InitializeLog",
        "ran out of data",
        "prefetch",
    ):
        assert noise not in output, (noise, output[-3000:])
    assert (tmp_path / "out" / "metrics.json").exists()


def test_a_manifest_count_that_is_a_string_is_one_line(corpus, tmp_path, capsys):
    import shutil

    train = tmp_path / "train"
    shutil.copytree(corpus["train"], train)
    found = json.loads((train / "manifest.json").read_text())
    found["num_examples"] = str(found["num_examples"])
    (train / "manifest.json").write_text(json.dumps(found))
    args = task_args(corpus, tmp_path / "out", "--train_steps", "5")
    args[args.index("--train_data") + 1] = str(train)
    assert task.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a valid manifest: num_examples is" in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.skipif(
    keras.backend.backend() == "jax",
    reason="one backend: the JAX half of "
    "the cause is test_train_step's NaN loss; this is the stop (~25 s)",
)
def test_a_non_finite_loss_stops_the_run_with_one_line_and_saves_nothing_of_it(
    corpus, tmp_path, capsys
):
    """Token ids beyond the vocabulary (shards whose checksums were made to match): the run
    stops at the first NaN loss, exit 2, and writes no checkpoint, backup, history or
    metrics for it (JAX used to report loss 0.0 and finish with exit 0)."""
    from tests.trainer.mlm_data import repetitive_sequences, write_split

    ids, mask = repetitive_sequences(64, seed=5)
    ids[mask > 0] += 100  # the vocabulary has 100 ids
    write_split(str(tmp_path / "lies"), ids, mask, corpus["info"])
    run = tmp_path / "run"
    code = task.main(
        task_args(
            {**corpus, "train": str(tmp_path / "lies")},
            run,
            "--train_steps",
            "4",
            "--eval_every",
            "2",
            "--save_every",
            "2",
        )
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: the training loss is nan at step 1")
    assert len(err.splitlines()) == 1
    written = {p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file()}
    assert not [p for p in written if p.startswith(("checkpoints/", "backup/", "logs/"))]
    assert "metrics.json" not in written and "history.json" not in written
