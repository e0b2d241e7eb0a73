"""What the rest of the trainer knows about the devices it runs on, whatever the backend.

A backend module (`tensorflow_backend`, `jax_backend`) turns the flags into a `Runtime`; task,
data and callbacks use only this. Nothing here imports TensorFlow or JAX.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from collections.abc import Callable

from common.errors import UserError
from trainer.backends.devices import DeviceSettings


class StrategyError(UserError):
    """No device of the kind asked for; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Runtime:
    """Devices, processes and the two backend-specific operations of a run.

    `replicas` is the number of devices the global batch is split over (all hosts);
    `batches_per_step` is how many batches of `rows_per_batch * per_replica_batch_size` rows
    one input pipeline gives per step (TensorFlow: one per local replica, rows_per_batch 1;
    JAX: one host batch, rows_per_batch = the host's devices).
    """

    backend: str
    replicas: int
    num_pipelines: int
    pipeline_id: int
    batches_per_step: int
    rows_per_batch: int
    chief: bool  # the one process that writes the run folder
    is_tpu: bool
    device: DeviceSettings
    scope: Callable  # () -> context manager in which the model is built
    distribute: Callable  # (dataset_fn of a data.PipelineShare) -> what `fit` takes
    # (n) -> whether every process has reached the step to stop at after a preemption notice
    # (SIGTERM on any host); n counts this process's train calls, 1, 2, ... None where
    # SIGTERM stays common/errors.py's (one process: it raises `Terminated` at once).
    preemption_sync: Callable | None = None
    # ([int, ...]) -> every process's list, in process order; None: one process.
    gather: Callable | None = None

    def pipeline_batch_size(self, per_replica_batch_size: int) -> int:
        return per_replica_batch_size * self.rows_per_batch


def has_tpu() -> bool:
    """A TPU VM shows its chips as /dev/accel* (v2-v4) or /dev/vfio/N (v5+, v6)."""
    return bool(
        os.environ.get("TPU_NAME") or glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*")
    )
