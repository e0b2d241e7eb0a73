"""Strategy selection without accelerators: CPU default, one clear message for a missing TPU/GPU
(TensorFlow's devices; the JAX backend's are in test_jax_backend.py)."""

import keras
import pytest
import tensorflow as tf

from trainer.backends.tensorflow_strategy import (
    StrategyError,
    runs_on_cpu_replicas,
    select_strategy,
)

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="tf.distribute strategies"
)


def test_cpu_and_auto_give_the_default_strategy_here():
    for kind in ("cpu", "auto"):
        strategy = select_strategy(kind)
        assert strategy.num_replicas_in_sync == 1 and not runs_on_cpu_replicas(strategy)


@pytest.mark.parametrize("tpu", [None, "local"])
def test_missing_tpu_is_one_clear_message(tpu):
    with pytest.raises(StrategyError) as err:
        select_strategy("tpu", tpu=tpu)
    message = str(err.value)
    assert message.startswith("cannot use TPU 'local'") and "--strategy gpu or cpu" in message
    assert "\n" not in message


def test_missing_gpu_is_one_clear_message():
    if tf.config.list_logical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    with pytest.raises(StrategyError, match="sees no GPU"):
        select_strategy("gpu")


class _Resolver:
    """A stand-in cluster resolver: what a multi-worker strategy exposes."""

    def __init__(self, task_type, task_id, cluster):
        self.task_type, self.task_id, self._cluster = task_type, task_id, cluster

    def cluster_spec(self):
        return tf.train.ClusterSpec(self._cluster)


class _Strategy:
    def __init__(self, resolver):
        self.cluster_resolver = resolver


@pytest.mark.parametrize(
    "task_type, task_id, cluster, chief",
    [
        ("chief", 0, {"chief": ["a:1"], "worker": ["b:1"]}, True),
        ("worker", 0, {"chief": ["a:1"], "worker": ["b:1"]}, False),
        ("worker", 0, {"worker": ["a:1", "b:1"]}, True),
        ("worker", 1, {"worker": ["a:1", "b:1"]}, False),
        ("evaluator", 0, {"worker": ["a:1"], "evaluator": ["c:1"]}, False),
    ],
)
def test_only_the_chief_writes(task_type, task_id, cluster, chief):
    from trainer.backends.tensorflow_strategy import is_chief

    assert is_chief(_Strategy(_Resolver(task_type, task_id, cluster))) is chief
    assert is_chief(select_strategy("cpu")) is True  # one process


@pytest.mark.slow
def test_cpu_replicas_from_the_command_line_trains_on_two_replicas(corpus, tmp_path):
    """`--cpu_replicas 2` in a fresh process (the conftest of this pass splits
    the CPU at collection time, which hid that the CLI listed GPUs first, initialising
    TensorFlow's devices, and then always refused with "pass the flag at startup")."""
    import json
    import os
    import subprocess
    import sys

    from tests.trainer.mlm_data import task_args

    repo = os.path.abspath(__file__).rsplit(os.sep + "tests" + os.sep, 1)[0]
    args = task_args(
        corpus,
        tmp_path,
        "--train_steps",
        "2",
        "--eval_every",
        "2",
        "--save_every",
        "2",
        "--max_eval_batches",
        "1",
        "--cpu_replicas",
        "2",
    )
    i = args.index("--per_replica_batch_size")
    args[i + 1] = "8"
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.task", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_config = json.loads((tmp_path / "run_config.json").read_text())
    assert run_config["replicas"] == 2 and run_config["global_batch_size"] == 16
