"""`python -m trainer.finetune` on several devices, as the trainer trains: `--cpu_replicas 2`
gives the JAX backend DataParallel over two CPU devices and TensorFlow a MirroredStrategy
over two logical CPUs (tests/trainer/conftest.py makes both before any test runs). The
global batch (`--batch_size`) is split over the replicas; the last, partial batch of an
epoch and of a prediction is padded to a multiple of the replicas with rows that weigh
nothing, so both runs see the same examples with the same weights."""

import dataclasses
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from common import flags
from common.errors import UserError
from tests.trainer import finetune_data as fd
from trainer.finetuning import finetune, job_run, protocol

JAX = os.environ.get("KERAS_BACKEND") == "jax"
EPOCHS = "4" if JAX else "1"  # TensorFlow compares the first epoch only (see below)


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return fd.export_preset(tmp_path_factory.mktemp("models"), "roberta")


@pytest.fixture(autouse=True)
def one_device_afterwards():
    """DataParallel is Keras' process-wide state: later tests must not build under it."""
    yield
    if JAX:
        import keras

        keras.distribution.set_distribution(None)


def _finetune(export, folder, *extra) -> dict:
    folder.mkdir()
    # 29 and 11 rows in batches of 8: the last batches (5 and 3 rows) do not split in two.
    train = fd.write(folder / "train.csv", fd.examples(29, 0, False, False))
    dev = fd.write(folder / "dev.csv", fd.examples(11, 1, False, False))
    args = [
        *("--model", export, "--train", train, "--dev", dev, "--text_column", "sentence"),
        *("--output_dir", str(folder / "out"), "--learning_rate", "1e-2", "--batch_size", "8"),
        *("--seeds", "1", "--epochs", EPOCHS, "--strategy", "cpu", *extra),
    ]
    if JAX or "--cpu_replicas" not in extra:
        assert finetune.main(args) == 0
    else:  # a fresh process: TensorFlow's collectives of earlier MirroredStrategy runs in this
        # worker (other test files) clash with a new one's (CollectiveReduceV2 errors in CI)
        run = subprocess.run(
            [sys.executable, "-m", "trainer.finetune", *args],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-3000:]
    return json.loads((folder / "out" / "results.json").read_text())


@pytest.mark.slow
def test_two_cpu_replicas_fine_tune_on_two_devices_with_the_metrics_of_one(export, tmp_path):
    """JAX runs the global batch as one program sharded over the devices: the same dev scores
    at every epoch as one device (the model learns here: chance at epoch 1, ~1.0 at 4). The
    train loss differs by the padded row that Keras' epoch mean counts (~0.5 %).
    TensorFlow's replicas each draw their own dropout masks: with the head's dropout off, 4
    epochs within 0.5 % and the same dev scores (the clip acts on the replicas' summed
    gradient: tests/trainer/training/test_optimization.py); with it, train loss 4-18 % apart by
    epoch 4; so there one epoch runs, its loss compared."""
    one = _finetune(export, tmp_path / "one")
    two = _finetune(export, tmp_path / "two", "--cpu_replicas", "2")
    # Read from the compiled classifier's variables: where the model lives, not a flag echoed.
    assert one["protocol"]["replicas"] == 1 and two["protocol"]["replicas"] == 2
    assert two["protocol"]["batch_size"] == 8  # the global batch, as on one device
    first, second = one["scores"]["seeds"][0]["epochs"], two["scores"]["seeds"][0]["epochs"]
    assert len(second) == int(EPOCHS)
    if not JAX:
        assert second[0]["train_loss"] == pytest.approx(first[0]["train_loss"], rel=2e-2)
        return
    assert first[-1]["dev"]["accuracy"] > 0.8  # it learnt: the comparison means something
    assert [e["train_loss"] for e in second] == pytest.approx(
        [e["train_loss"] for e in first], rel=1e-2
    )
    for mine, theirs in zip(second, first, strict=True):
        assert mine["dev"] == pytest.approx(theirs["dev"], abs=1e-6)


def test_a_global_batch_the_replicas_cannot_share_is_one_line(export, tmp_path, capsys):
    train = fd.write(tmp_path / "train.csv", fd.examples(8, 0, False, False))
    code = finetune.main(
        [
            *("--model", export, "--train", train, "--dev", train, "--text_column", "sentence"),
            *("--output_dir", str(tmp_path / "out"), "--batch_size", "7"),
            *("--strategy", "cpu", "--cpu_replicas", "2"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ")
    assert "--batch_size 7" in err and "2 replicas" in err


@pytest.mark.skipif(JAX, reason="keras#19005 is TensorFlow's MirroredStrategy over CPUs")
def test_jit_compile_true_under_mirrored_strategy_over_cpus_is_one_line(export, tmp_path, capsys):
    train = fd.write(tmp_path / "train.csv", fd.examples(8, 0, False, False))
    code = finetune.main(
        [
            *("--model", export, "--train", train, "--dev", train, "--text_column", "sentence"),
            *("--output_dir", str(tmp_path / "out"), "--jit_compile", "true"),
            *("--strategy", "cpu", "--cpu_replicas", "2"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "keras#19005" in err


def test_each_process_of_a_pod_gives_its_slice_of_every_global_batch():
    """Two processes, global batches of 8 over 14 rows (padded for 2 replicas): process 0
    gives rows 0-3 and 8-10, process 1 rows 4-7 and 11-13; put together in process order,
    batch by batch (as Keras' DataParallel does), they are the one process's batches."""
    shares = [protocol.Devices(2, p, 2).share(14, 8) for p in (0, 1)]
    assert [s.tolist() for s in shares] == [[0, 1, 2, 3, 8, 9, 10], [4, 5, 6, 7, 11, 12, 13]]
    assert protocol.Devices(2, 0, 1).share(14, 8) is None
    arrays = protocol.training_arrays(
        ({"ids": np.arange(13)[:, None]}, np.arange(13)), 1, 1, 8, protocol.Devices(2, 1, 2)
    )
    assert arrays["batch_size"] == 4 and len(arrays["y"]) == 7
    assert arrays["sample_weight"].tolist() == [1, 1, 1, 1, 1, 1, 0]  # the padding row last


def test_pod_hosts_that_fine_tune_different_data_are_refused_before_training():
    data = protocol.TaskData(
        "classification",
        2,
        ({"ids": np.ones((4, 3), "int32")}, np.zeros(4, "int32")),
        ({"ids": np.ones((2, 3), "int32")}, np.zeros(2, "int32")),
    )
    host_0 = {}

    def remember(values):  # host 0's own digest, as process_allgather would give it
        host_0["digest"] = values[0]
        return [values]

    job_run.check_hosts_agree(types.SimpleNamespace(gather=remember), _flags("here"), data)
    pod = types.SimpleNamespace(gather=lambda values: [[host_0["digest"]], values])
    # Another --output_dir on host 1 is no disagreement: only process 0 writes.
    job_run.check_hosts_agree(pod, _flags("there"), data)
    with pytest.raises(UserError, match="hosts fine-tune different data or flags"):
        job_run.check_hosts_agree(pod, _flags("here", "--learning_rate", "1e-3"), data)
    other = protocol.TaskData("classification", 2, data.train, (data.dev[0], np.ones(2, "int32")))
    with pytest.raises(UserError, match="hosts fine-tune different data or flags"):
        job_run.check_hosts_agree(pod, _flags("here"), other)


def _flags(output_dir, *extra) -> dict:
    """Every flag as parsed, as a job carries them (`jobs.Settings.flags`)."""
    args = ["--model", "m", "--train", "t.csv", "--dev", "d.csv", "--output_dir", output_dir]
    parsed = flags.parse(flags.ArgumentParser(), finetune.FinetuneFlags, [*args, *extra])
    return dataclasses.asdict(parsed)
