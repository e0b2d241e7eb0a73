"""A simulated 2-host pod on JAX: two processes on 127.0.0.1 joined by `jax.distributed`
(CPU collectives over gloo), each with one CPU device and its own half of the training files,
only process 0 writing the run folder; both killed with SIGKILL and restarted, the final
weights equal to the uninterrupted pod run's. TensorFlow cannot show this path on one
machine (a TPU pod there is one client process), so these tests run on the JAX pass only."""

import json
import os
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.trainer.mlm_data import task_args

pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax",
                                reason="the multi-process path is JAX's")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POD = ["--train_steps", "40", "--eval_every", "20", "--save_every", "20",
       "--per_replica_batch_size", "8"]  # global batch 16, as the one-process reference


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pod(kill_at: str, args: list[str]) -> list[subprocess.CompletedProcess]:
    """Runs both hosts of the pod with the same command (as `--worker=all` does)."""
    port = _free_port()
    procs = []
    for process_id in range(2):
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one device each
        env.update(KERAS_BACKEND="jax", KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{port}",
                   KERAS_DISTRIBUTION_NUM_PROCESSES="2",
                   KERAS_DISTRIBUTION_PROCESS_ID=str(process_id))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tests.trainer.killable_run", kill_at, *args], cwd=REPO,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def _args(corpus, out):
    args = task_args(corpus, out, *POD)
    i = args.index("--per_replica_batch_size")
    del args[i:i + 2]  # task_args' 16; POD gives 8 per host
    return args


def _weights(path):
    from trainer import model_source

    return model_source.load_masked_lm(str(path))[0].get_weights()


@pytest.fixture(scope="module")
def pod_run(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("pod")
    results = _pod("none", _args(corpus, out))
    for r in results:
        assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_two_hosts_train_one_global_batch_and_only_host_0_writes(pod_run):
    run_config = json.loads((pod_run / "run_config.json").read_text())
    assert run_config["backend"] == "jax" and run_config["input_pipelines"] == 2
    assert run_config["replicas"] == 2 and run_config["global_batch_size"] == 16
    history = json.loads((pod_run / "history.json").read_text())
    assert [e["step"] for e in history] == [20, 40]
    assert history[-1]["eval_loss"] < history[0]["eval_loss"]
    assert sorted(os.listdir(pod_run / "checkpoints")) == [
        "ckpt-00000020.weights.h5", "ckpt-00000040.weights.h5"]


def test_a_killed_pod_resumes_to_the_uninterrupted_weights(corpus, pod_run, tmp_path):
    args = _args(corpus, tmp_path)
    killed = _pod("mid_interval:30", args)
    assert [r.returncode for r in killed] == [-9, -9], [r.stderr[-2000:] for r in killed]
    assert sorted(os.listdir(tmp_path / "backup")) == ["state-00000020.weights.h5"]
    resumed = _pod("none", args)
    for r in resumed:
        assert r.returncode == 0, r.stderr[-3000:]
    worst = max(float(np.max(np.abs(a - b)))
                for a, b in zip(_weights(tmp_path), _weights(pod_run)))
    print(f"pod killed at step 30 and resumed: max |weight difference| = {worst:.3g}")
    assert worst < 2e-4, worst
