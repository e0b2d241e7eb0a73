"""`python -m trainer.finetune` on a simulated 2-host JAX pod: two processes on 127.0.0.1
joined by `jax.distributed` (CPU collectives over gloo), one CPU device each, the set-up of
tests/trainer/pretraining/test_pod.py. Both read the same files; each gives Keras its share of every
global batch, the dev predictions are gathered so that both score the same, and process 0
alone writes. The reference is one process over two CPU devices (conftest.py makes them):
the same mesh shape, so the same program. TensorFlow has no such path (a TPU pod there is one
client process): JAX pass only."""

import json
import os

import keras
import pytest

from tests.support import pods
from tests.trainer import finetune_data as fd
from trainer.finetuning import finetune

pytestmark = [
    pytest.mark.slow,  # three fine-tunes, two of them in fresh processes
    pytest.mark.skipif(keras.backend.backend() != "jax", reason="the multi-process path is JAX's"),
]


def _pod(host_args: list[list[str]]) -> list:
    """Runs one fine-tuning process per host, host i with `host_args[i]`."""
    return pods.run_pod([["trainer.finetune", *args] for args in host_args])


@pytest.fixture(autouse=True)
def one_device_afterwards():
    """DataParallel is Keras' process-wide state: later tests must not build under it."""
    yield
    keras.distribution.set_distribution(None)


def test_two_processes_fine_tune_as_one_process_on_two_devices_and_only_process_0_writes(
    tmp_path,
):
    export = fd.export_preset(tmp_path, "roberta")
    # 31, 15 and 7 rows: each padded with a row of no weight to whole global batches of 8
    # (one compiled shape), of which each process gives Keras 4 rows.
    train = fd.write(tmp_path / "train.csv", fd.examples(31, 0, False, False))
    dev = fd.write(tmp_path / "dev.csv", fd.examples(15, 1, False, False))
    test = fd.write(tmp_path / "test.csv", fd.examples(7, 2, False, False))
    common = [
        *("--model", export, "--train", train, "--dev", dev, "--test", test),
        *("--text_column", "sentence", "--learning_rate", "1e-2", "--batch_size", "8"),
        *("--seeds", "1", "--epochs", "4", "--strategy", "cpu"),
    ]
    assert (
        finetune.main([*common, "--output_dir", str(tmp_path / "one"), "--cpu_replicas", "2"]) == 0
    )
    hosts = _pod(
        [
            [*common, "--output_dir", str(tmp_path / "pod")],
            # Another folder on host 1: whatever it names, only process 0 writes.
            [*common, "--output_dir", str(tmp_path / "host1")],
        ]
    )
    for host in hosts:
        assert host.returncode == 0, host.stderr[-3000:]
    assert not (tmp_path / "host1").exists()
    assert "results:" in hosts[0].stdout and "results:" not in hosts[1].stdout
    one = json.loads((tmp_path / "one" / "results.json").read_text())
    pod = json.loads((tmp_path / "pod" / "results.json").read_text())
    assert pod["protocol"]["replicas"] == 2 and pod["protocol"]["processes"] == 2
    assert one["protocol"]["processes"] == 1
    assert os.listdir(tmp_path / "pod" / "logs") == ["seed-1"]
    first, second = one["scores"]["seeds"][0], pod["scores"]["seeds"][0]
    print(
        "pod vs one process, per epoch: train loss",
        [(e["train_loss"], f["train_loss"]) for e, f in zip(second["epochs"], first["epochs"])],
    )
    for mine, theirs in zip(second["epochs"], first["epochs"], strict=True):
        assert mine["dev"] == pytest.approx(theirs["dev"], abs=1e-6)
        assert mine["train_loss"] == pytest.approx(theirs["train_loss"], rel=1e-4)
    assert second["test"] == pytest.approx(first["test"], abs=1e-6)
    # It learnt (chance 0.5; 0.8 and a loss of 0.69 -> 0.29 with the seeded tiny model), so the
    # comparison above means something.
    assert first["epochs"][-1]["dev"]["accuracy"] >= 0.75


def test_sigterm_on_one_host_stops_both_at_one_batch_and_process_0_writes_the_complete_seeds(
    tmp_path,
):
    """Host 1 gets SIGTERM at seed 2's first batch (and trains on for 3 s, as a preempted VM
    does): jax.distributed's preemption notifier tells host 0, both stop at the batch JAX's
    sync point agrees on and exit 143 in one line; process 0's results.json holds seed 1,
    marked interrupted. Before: host 1 noted the signal and both fine-tuned to the end."""
    export = fd.export_preset(tmp_path, "roberta")
    train = fd.write(tmp_path / "train.csv", fd.examples(16, 0, False, False))
    dev = fd.write(tmp_path / "dev.csv", fd.examples(8, 1, False, False))
    common = [
        *("--model", export, "--train", train, "--dev", dev, "--text_column", "sentence"),
        *("--learning_rate", "1e-3", "--batch_size", "8", "--seeds", "1,2", "--epochs", "3"),
        *("--strategy", "cpu", "--output_dir", str(tmp_path / "out")),
    ]
    # 2 batches an epoch: seed 1 is calls 1-6, seed 2 starts at call 7.
    hosts = pods.run_pod(
        [["tests.trainer.killable_finetune", kill, *common] for kill in ("none", "sigterm_at:7:3")]
    )
    assert [h.returncode for h in hosts] == [143, 143], [h.stderr[-3000:] for h in hosts]
    lines = [[x for x in h.stderr.splitlines() if x.startswith("error:")] for h in hosts]
    assert all(len(found) == 1 for found in lines), lines
    where = [found[0].split("stopped at ")[1].split(" of ")[0] for found in lines]
    assert where[0] == where[1] and where[0].startswith("seed 2, epoch "), where
    assert "the 1 complete seed(s) are in" in lines[0][0] and "starts afresh" in lines[0][0]
    found = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["seed"] for r in found["scores"]["seeds"]] == [1]
    assert where[0] in found["interrupted"]
