"""The warmup-stable-decay ("trapezoidal") learning-rate schedule, beside WarmupLinearDecay
(trainer/training/optimizer.py).

Linear warmup to the peak, the peak held, then a 1 - sqrt decay to 0 over the last updates:

    rate(s) = peak * s / W                              s < W (warmup)
            = peak                                      W <= s < S (stable)
            = peak * (1 - sqrt((s - S) / D))            S <= s < S + D (decay)
            = 0                                         s >= S + D

The decay's shape is Hägele et al. 2024's "(1-sqrt)" cooldown (arXiv 2405.18392, their code's
`wsd_schedule(decay_type="sqrt")`), which ModernBERT decays with. Because the rate before S does
not depend on when the decay starts, a run in its stable phase can be decayed from any of its
steps later (--decay_from_step, docs/training.md).

Example:
    >>> schedule = WarmupStableDecay(1e-3, warmup_steps=10, decay_start=80, decay_steps=20)
    >>> [round(float(schedule(s)), 6) for s in (5, 50, 85, 100)]
    [0.0005, 0.001, 0.0005, 0.0]
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="trainer")
class WarmupStableDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Warmup, stable, then 1 - sqrt decay (module docstring).

    Keras calls a schedule with its count of micro-batches, also under gradient
    accumulation; `micro_batches` (the accumulation steps) turns that into updates, as in
    WarmupLinearDecay.

    Args:
        peak: the rate of the stable phase.
        warmup_steps: updates of the linear warmup (W).
        decay_start: the update at which the decay starts (S, at least W).
        decay_steps: updates of the decay (D); the rate is 0 from S + D on.
        micro_batches: gradient accumulation steps per update.
    """

    def __init__(
        self,
        peak: float,
        warmup_steps: int,
        decay_start: int,
        decay_steps: int,
        micro_batches: int = 1,
    ):
        if not 0 <= warmup_steps <= decay_start:
            raise ValueError(f"the decay starts at {decay_start}, inside the warmup")
        self.peak = peak
        self.warmup_steps = warmup_steps
        self.decay_start = decay_start
        self.decay_steps = decay_steps
        self.micro_batches = micro_batches

    def __call__(self, step):
        if self.micro_batches > 1:
            step = ops.floor_divide(step, self.micro_batches)
        step = ops.cast(step, "float32")
        warmup = self.peak * step / max(1, self.warmup_steps)
        progress = ops.clip((step - self.decay_start) / max(1, self.decay_steps), 0.0, 1.0)
        held_or_decaying = self.peak * (1.0 - ops.sqrt(progress))
        return ops.where(step < self.warmup_steps, warmup, held_or_decaying)

    def get_config(self):
        return dict(
            peak=self.peak,
            warmup_steps=self.warmup_steps,
            decay_start=self.decay_start,
            decay_steps=self.decay_steps,
            micro_batches=self.micro_batches,
        )
