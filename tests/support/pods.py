"""A JAX pod on one machine: one process per host, joined by `jax.distributed` on a free
local port through Keras' KERAS_DISTRIBUTION_* variables, one CPU device each.

Example:
    >>> hosts = run_pod([["trainer.finetune", *args0], ["trainer.finetune", *args1]])
    >>> [h.returncode for h in hosts]
    [0, 0]
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_pod(modules_and_args: list[list[str]], timeout: int = 300) -> list:
    """Runs `python -m MODULE ARGS...` for each host (host i: the i-th list) and waits for
    all; a host past `timeout` seconds is killed. Returns their CompletedProcess, in order."""
    port = free_port()
    procs = []
    for process_id, command in enumerate(modules_and_args):
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one device each
        env.update(
            KERAS_BACKEND="jax",
            KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{port}",
            KERAS_DISTRIBUTION_NUM_PROCESSES=str(len(modules_and_args)),
            KERAS_DISTRIBUTION_PROCESS_ID=str(process_id),
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", *command],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results
