"""The JAX backend: `keras.distribution.DataParallel` over the devices, one process per host.

On a pod slice every host runs the same command; `keras.distribution.initialize()` joins
them (with no arguments JAX finds the slice's hosts itself; elsewhere the
KERAS_DISTRIBUTION_JOB_ADDRESSES / _NUM_PROCESSES / _PROCESS_ID environment variables name
them). Each process reads only its own share of the files and gives Keras its host batch
(`auto_shard_dataset=False`: the data is already sharded, Keras must not shard it again);
Keras assembles the global batch from the hosts' batches in process order. Process 0 alone
writes the run folder.

Once joined, JAX's preemption notifier owns SIGTERM (a TPU VM's preemption or maintenance
notice): every host stops at the train call JAX's preemption sync point agrees on, with the
backup of that step written (`callbacks.PreemptionSync`), and exits with 143. Before the first
collective the hosts compare the run they continue (`plan.check_hosts_agree`); an error on a
host (a refusal, or a collective that found a peer gone) is one line and ends it at once.
"""

from __future__ import annotations

import contextlib
import os
import sys

import jax
import keras
import numpy as np

from common.errors import UserError
from trainer.backends import devices as device_rules
from trainer.backends.runtime import Runtime, StrategyError, has_tpu
from trainer.data.splits import GRAIN, PipelineShare

_CLUSTER_ENV = "KERAS_DISTRIBUTION_JOB_ADDRESSES"


def _platform(kind: str, no_tpu: bool) -> str:
    if kind == "auto":
        return "tpu" if has_tpu() and not no_tpu else jax.default_backend()
    return kind


def _initialize(platform: str) -> None:
    """Joins the hosts of a pod slice (or of the cluster the environment names)."""
    if os.environ.get(_CLUSTER_ENV):
        if platform == "cpu":  # CPU collectives between processes go over gloo
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        keras.distribution.initialize()
    elif platform == "tpu":
        keras.distribution.initialize()


def _preemption_sync():
    """JAX's preemption sync point once jax.distributed joined the processes: its preemption
    notifier then owns SIGTERM (it replaced common/errors.py's handler), and a notice on any
    host makes every host stop at the same train call."""
    if not jax.distributed.is_initialized():
        return None
    from jax.experimental import multihost_utils

    return multihost_utils.reached_preemption_sync_point


def _gather(values: list) -> list:
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(np.asarray(values, np.int32)).tolist()


# How a collective or the coordination service reports a process that is gone (checked on
# CPU/gloo: "Gloo AllGather failed: ... Connection reset by peer"; a missed heartbeat:
# "Task 1 heartbeat timeout", "The following tasks are unhealthy").
_PEER_LOST = (
    "Gloo",
    "Connection reset by peer",
    "heartbeat",
    "unhealthy",
    "coordination service",
    "Connection refused",
    "Socket closed",
)


def peer_lost(err: BaseException) -> bool:
    """Whether `err` says that another process of the pod is gone."""
    return jax.distributed.is_initialized() and any(marker in str(err) for marker in _PEER_LOST)


def _one_line(err: Exception) -> str | None:
    if isinstance(err, UserError):
        return str(err).strip()
    if peer_lost(err):
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        return (
            f"another process of the pod stopped ({first}); restart the same command on "
            "every host: the run resumes from its last backup."
        )
    return None


@contextlib.contextmanager
def errors_end_pod_processes():
    """On a pod, an error (a refusal, or a collective that found a peer gone) is one line and
    ends this process at once: jax.distributed's exit would wait at a shutdown barrier for
    every host, then abort with a C++ stack trace when one never comes (checked: a peer
    SIGKILLed, the survivor died 75 s later that way). A SIGTERM stop (`Terminated`, every
    host at the same step) and bugs (a traceback) leave as usual."""
    try:
        yield
    except Exception as err:
        line = _one_line(err) if jax.distributed.is_initialized() else None
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(2)


def _devices(platform: str, cpu_replicas: int) -> list:
    try:
        devices = jax.devices(platform)
    except RuntimeError as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise StrategyError(
            f"--strategy {platform}: JAX sees no {platform.upper()} here "
            f"({first}); pass --strategy cpu, or run on a machine with one."
        ) from None
    if platform == "cpu":  # as many CPU devices per process as asked for (1: the default)
        mine = [d for d in devices if d.process_index == jax.process_index()][:cpu_replicas]
        if len(mine) < cpu_replicas:
            raise StrategyError(
                f"--cpu_replicas {cpu_replicas}: JAX has {len(mine)} CPU device(s); set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={cpu_replicas} at startup."
            )
        devices = [d for d in devices if d.process_index != jax.process_index() or d in mine]
    return devices


def replicate_predictions(model) -> None:
    """On several processes, makes the model's compiled predict step return its outputs
    replicated on every device: Keras' step leaves them sharded like the batch, over devices
    of other processes, and `predict` then fails to read them into NumPy ("Fetching value for
    `jax.Array` that spans non-addressable devices"). XLA gathers them inside the step (one
    all-gather of the logits per batch), so every process reads the whole batch, in process
    order, and scores what the others score."""
    if jax.process_count() == 1:
        return
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = keras.distribution.distribution().device_mesh.backend_mesh
    everywhere = NamedSharding(mesh, PartitionSpec())
    step = model.predict_step  # Keras' JAX trainer: (state, data) -> (outputs, variables)

    def predict_step(state, data):
        outputs, variables = step(state, data)
        return jax.lax.with_sharding_constraint(outputs, everywhere), variables

    model.predict_step = predict_step  # read by make_predict_function when it compiles
    model.predict_function = None


def model_replicas(model) -> int:
    """The devices the model's first variable lives on (DataParallel replicates them all)."""
    return len(model.variables[0].value.sharding.device_set)


def setup(config: device_rules.DeviceRequest) -> Runtime:
    platform = _platform(config.strategy, config.no_tpu)
    _initialize(platform)
    devices = _devices(platform, config.cpu_replicas)
    # Set (or cleared) on every run: the distribution is Keras' process-wide state.
    keras.distribution.set_distribution(
        keras.distribution.DataParallel(
            devices=[f"{d.platform}:{d.id}" for d in devices], auto_shard_dataset=False
        )
        if len(devices) > 1
        else None
    )
    local = sum(d.process_index == jax.process_index() for d in devices)
    on_tpu = platform == "tpu"
    device = device_rules.device_settings(
        config.precision,
        config.jit_compile,
        config.steps_per_execution,
        on_tpu,
        False,
        on_gpu=platform == "gpu",
        fused_attention=config.fused_attention,
    )
    share = PipelineShare(jax.process_index(), jax.process_count(), 1, GRAIN)  # no TF
    return Runtime(
        "jax",
        len(devices),
        jax.process_count(),
        jax.process_index(),
        1,
        local,
        jax.process_index() == 0,
        on_tpu,
        device,
        contextlib.nullcontext,
        lambda dataset_fn: dataset_fn(share),
        _preemption_sync(),
        _gather if jax.process_count() > 1 else None,
    )
