"""A seed whose fine-tuning diverges: its training loss turns NaN or infinite.

Pretraining stops the whole run at the first non-finite loss (`trainer.pretraining.callbacks.
StopOnNonFiniteLoss`); fine-tuning stops only that seed, at the batch where the loss turned,
and goes on with the next: the seeds are independent runs, and one that diverges (a learning
rate too high for it) says nothing of the others. The seed is recorded as diverged, with the
reason, in results.json and the table, has no scores (a model that produced NaN has none to
report), and is left out of every mean and of the model card, which say so.

On a pod every process sees the same loss (the global batch's), so every process stops the
seed at the same batch.

Example:
    >>> guard = NonFiniteLoss(epoch=2)
    >>> model.fit(..., callbacks=[guard])
    >>> guard.found
    'the training loss is nan at epoch 2, batch 3'
"""

from __future__ import annotations

import keras
import numpy as np


class NonFiniteLoss(keras.callbacks.Callback):
    """Stops `fit` at the first batch whose (running) training loss is not finite and says
    where in `found` (None while the loss is finite)."""

    def __init__(self, epoch: int):
        super().__init__()
        self.epoch = epoch
        self.found: str | None = None

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if self.found is None and loss is not None and not np.isfinite(float(loss)):
            self.found = (
                f"the training loss is {float(loss)} at epoch {self.epoch}, batch {batch + 1}"
            )
            self.model.stop_training = True


NO_FINITE_DEV = "no epoch gave finite dev predictions"


def record(seed: int, epochs: list, reason: str, seconds: float) -> dict:
    """The record of a diverged seed: its epochs so far, the reason, no scores."""
    return {
        "seed": seed,
        "best_epoch": None,
        "dev": None,
        "epochs": epochs,
        "diverged": reason,
        "seconds": seconds,
    }


def line(name: str, seed: int, reason: str) -> str:
    """The one line printed for a diverged seed."""
    return (
        f"{name} seed {seed}: diverged ({reason}): this seed stopped, has no scores and is "
        "left out of the means and the model card; lower --learning_rate"
    )
