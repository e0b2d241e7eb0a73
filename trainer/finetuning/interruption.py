"""SIGTERM during fine-tuning (a preemption notice): every process stops at one batch end,
process 0 writes the seeds that are complete, and the command exits 143 in one line.

On a JAX pod, jax.distributed's preemption notifier owns SIGTERM once the processes joined
(`keras.distribution.initialize`): a notice on any process reaches all of them, and JAX's
preemption sync point (`runtime.preemption_sync`, asked after every train batch with a count
that is the same on every process) turns True on all of them at the same batch, so no
process is left waiting in a collective. Elsewhere (one process, TensorFlow) this module's
own handler notes the signal and the same batch-end check stops the training: the seed in
progress is dropped, never half-reported.

A rerun of the command starts afresh (fine-tuning keeps no optimizer state between runs; a
seed is minutes): it removes the interrupted run's results.json and logs and fine-tunes
every seed again.

Example:
    >>> with watching(runtime) as watch:
    ...     protocol.run_seed(models, seed, watch=watch)   # raises Interrupted on SIGTERM
"""

from __future__ import annotations

import contextlib
import signal
import threading

import keras

from common.errors import Terminated


class Interrupted(Terminated):
    """The training stopped at a SIGTERM; `seed` and `epoch` say where."""

    def __init__(self, seed: int, epoch: int, batch: int):
        self.seed, self.epoch, self.batch = seed, epoch, batch
        super().__init__(
            f"stopped by signal SIGTERM (a preemption notice): every process stopped at "
            f"seed {seed}, epoch {epoch}, batch {batch}"
        )


def ended(stop: Interrupted, task: str, complete: int, path: str | None) -> str:
    """The line the command ends with: where it stopped, what was written."""
    if not complete:
        written = "no seed was complete: nothing written"
    else:
        written = f"the {complete} complete seed(s) are in {path} (marked interrupted)"
    return f"{stop} of {task}; {written}; the same command starts afresh"


class Watch(keras.callbacks.Callback):
    """After every train batch asks `reached(n)` (n counts the batches of the whole command,
    the same on every process) and stops `fit` when it says True."""

    def __init__(self, reached):
        super().__init__()
        self.reached = reached
        self.calls = 0
        self.stopped_at: int | None = None  # the batch of the epoch it stopped after

    def on_train_batch_end(self, batch, logs=None):
        self.calls += 1
        if self.stopped_at is None and self.reached(self.calls):
            self.stopped_at = batch + 1
            self.model.stop_training = True

    def check(self, seed: int, epoch: int) -> None:
        """Raises Interrupted if the last `fit` was stopped."""
        if self.stopped_at is not None:
            raise Interrupted(seed, epoch, self.stopped_at)


@contextlib.contextmanager
def watching(runtime):
    """A Watch for the block: on JAX's preemption sync point where the processes joined,
    else on this module's SIGTERM handler (in the main thread; elsewhere the handler in
    place, run_cli's, stays)."""
    if runtime is not None and runtime.preemption_sync is not None:
        yield Watch(runtime.preemption_sync)
        return
    noted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield Watch(lambda calls: noted.is_set())
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: noted.set())
    try:
        yield Watch(lambda calls: noted.is_set())
    finally:
        signal.signal(signal.SIGTERM, previous)
