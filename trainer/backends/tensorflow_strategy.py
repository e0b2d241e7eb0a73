"""The TensorFlow backend's devices: one flag to a `tf.distribute` strategy: TPU (VM, named,
pod), GPUs, or the default (CPU). Only `tensorflow_backend.py` imports it.

Example:
    >>> strategy = select_strategy("auto")          # whatever this machine has
    >>> strategy = select_strategy("tpu", tpu="local")  # on a TPU VM
"""

from __future__ import annotations

import functools

import tensorflow as tf

from trainer.backends.runtime import StrategyError, has_tpu


def connect_tpu(tpu: str | None = None, zone: str | None = None, project: str | None = None):
    """TPUStrategy via TPUClusterResolver; resolver failures become one `StrategyError`.

    Without a TPU the resolver raises `ValueError` (no name), `NotFoundError` (`local` on a
    machine without TPUs) or talks to the GCE metadata server (named TPU), all checked
    with TensorFlow 2.21 on a machine without TPUs.
    """
    name = tpu or "local"
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=name, zone=zone, project=project
        )
        if name != "local":  # a named TPU or pod: the hosts are remote workers
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError, RuntimeError, OSError) as err:
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise StrategyError(
            f"cannot use TPU {name!r}: {first_line}. On a TPU VM pass --tpu local; for a "
            "remote TPU pass --tpu NAME (and --tpu_zone/--gcp_project); without a TPU pass "
            "--strategy gpu or cpu."
        ) from None
    return tf.distribute.TPUStrategy(resolver)


def split_cpu(count: int) -> None:
    """Splits the CPU into `count` logical devices. Only possible before TensorFlow
    initialises its devices; afterwards this does nothing (what exists is then used)."""
    try:
        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0],
            [tf.config.LogicalDeviceConfiguration()] * count,
        )
    except RuntimeError:  # already initialised
        pass


def cpu_replicas(count: int) -> tf.distribute.Strategy:
    """MirroredStrategy over `count` logical CPU devices: the multi-replica code path without
    accelerators (tests, debugging)."""
    split_cpu(count)
    logical = tf.config.list_logical_devices("CPU")
    if len(logical) < count:
        raise StrategyError(
            f"--cpu_replicas {count}: TensorFlow was initialised with {len(logical)} CPU "
            "device(s) before the trainer could split the CPU; pass the flag at startup."
        )
    return tf.distribute.MirroredStrategy([d.name for d in logical[:count]])


def select_strategy(
    kind: str = "auto",
    tpu: str | None = None,
    zone: str | None = None,
    project: str | None = None,
    num_cpu_replicas: int = 1,
    no_tpu: bool = False,
) -> tf.distribute.Strategy:
    """`tpu`, `gpu`, `cpu`, or `auto` (TPU if one is attached or named and not `no_tpu`, else
    GPUs, else CPU).

    Example:
        >>> select_strategy("cpu", num_cpu_replicas=2).num_replicas_in_sync
        2
    """
    if kind == "tpu" or (kind == "auto" and not no_tpu and (tpu or has_tpu())):
        return connect_tpu(tpu, zone, project)
    # Physical, not logical: listing logical devices initialises TensorFlow's devices, after
    # which the CPU can no longer be split for --cpu_replicas.
    gpus = tf.config.list_physical_devices("GPU")
    if kind == "gpu" and not gpus:
        raise StrategyError("--strategy gpu, but TensorFlow sees no GPU on this machine.")
    if kind in ("gpu", "auto") and gpus:
        return tf.distribute.MirroredStrategy()  # all local GPUs (also right for one)
    if num_cpu_replicas > 1:
        return cpu_replicas(num_cpu_replicas)
    return tf.distribute.get_strategy()  # the default strategy: one CPU device


def is_tpu(strategy) -> bool:
    return isinstance(strategy, (tf.distribute.TPUStrategy,))


def runs_on_cpu_replicas(strategy) -> bool:
    """MirroredStrategy over (logical) CPU devices, where jit_compile fails (keras#19005)."""
    if not isinstance(strategy, tf.distribute.MirroredStrategy):
        return False
    devices = strategy.extended.worker_devices
    return len(devices) > 1 and all("CPU" in d.upper() for d in devices)


@functools.cache
def host_xla_available() -> bool:
    """Whether XLA can compile for the CPU. The TPU build of TensorFlow (tensorflow-tpu 2.20)
    ships no XLA CPU backend ("could not find registered transfer manager for platform
    Host"): on a CPU there, neither the step nor the masking may be jit-compiled."""
    try:
        with tf.device("/CPU:0"):
            tf.function(lambda x: x + 1, jit_compile=True)(tf.constant(1))
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
        return False
    return True


def cpu_without_xla(strategy) -> bool:
    """Training runs on the CPU with a TensorFlow that cannot XLA-compile for it."""
    return (
        not is_tpu(strategy)
        and not tf.config.list_logical_devices("GPU")
        and not host_xla_available()
    )


def num_input_pipelines(strategy) -> int:
    """Hosts that each run an input pipeline (TPU pod slices have several); 1 elsewhere."""
    return int(getattr(strategy.extended, "num_hosts", 1) or 1)


def is_chief(strategy) -> bool:
    """Whether this process writes the run's files (checkpoints, backups, logs, metrics).

    A TPU VM or pod slice is driven by one client process (on a pod, worker 0 runs the
    program with the TPU's name and the other hosts only serve their chips: Cloud TPU's
    "Run TensorFlow code on TPU Pod slices", cloud.google.com/tpu/docs/tensorflow-pods),
    which is the chief. Under a
    multi-worker cluster (e.g. MultiWorkerMirroredStrategy) the chief is the `chief` task,
    or worker 0 when the cluster has none; every other worker writes nothing.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or isinstance(resolver, tf.distribute.cluster_resolver.TPUClusterResolver):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type in (None, "chief"):
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and not has_chief
