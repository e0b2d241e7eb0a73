"""AdamW with linear warmup then linear decay to zero, as BERT/RoBERTa pretraining uses (or
warmup-stable-decay: trainer/training/schedules.py), optionally with StableAdamW's update
clipping (trainer/backends/update_clipping.py) and accumulating gradients over several
micro-batches per update.

Gradient accumulation is Keras' own (`gradient_accumulation_steps`): the optimizer sums the
gradients of N micro-batches and applies their mean on the N-th (clipping and weight decay
then act on that mean, as for one batch of N times the size). Keras counts micro-batches
in its private iteration variable and exposes updates as `optimizer.iterations`; every step
count of the trainer (schedule, checkpoints, logs, the resume position) is in updates.

Example:
    >>> optimizer = build_optimizer(peak_learning_rate=1e-4, total_steps=10_000,
    ...                             warmup_steps=500, weight_decay=0.01, clip_norm=1.0,
    ...                             grad_accum_steps=4)
"""

from __future__ import annotations

import dataclasses

import keras

from trainer import backends
from trainer.training.schedules import WarmupStableDecay

# LayerNorm scale/offset and biases are not decayed (BERT, RoBERTa, HF `create_optimizer`);
# Keras matches these against variable names (`gamma`, `beta`, `bias`, `output_bias`...).
NO_DECAY_NAMES = ("bias", "gamma", "beta")


@keras.saving.register_keras_serializable(package="trainer")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak` over `warmup_steps`, then linear decay to 0 at
    `total_steps`. Keras ships warmup only with cosine decay, hence this small class; the
    decay half is Keras' own `PolynomialDecay(power=1)`.

    Keras calls a schedule with its count of micro-batches, also under gradient
    accumulation; `micro_batches` (the accumulation steps) turns that into updates, so the
    rate of update `s` is the same whatever the accumulation.

    Args:
        peak: the rate at the end of the warmup.
        total_steps: updates of the whole run; the rate is 0 there.
        warmup_steps: updates of the linear warmup.
        micro_batches: gradient accumulation steps per update.

    Example:
        >>> schedule = WarmupLinearDecay(1e-3, total_steps=100, warmup_steps=10)
        >>> float(schedule(5)), float(schedule(10)), float(schedule(100))
        (0.0005, 0.001, 0.0)
    """

    def __init__(self, peak: float, total_steps: int, warmup_steps: int, micro_batches: int = 1):
        self.peak = peak
        self.micro_batches = micro_batches
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self._decay = keras.optimizers.schedules.PolynomialDecay(
            peak, decay_steps=max(1, total_steps - warmup_steps), end_learning_rate=0.0, power=1.0
        )

    def __call__(self, step):
        if self.micro_batches > 1:
            step = keras.ops.floor_divide(step, self.micro_batches)
        step = keras.ops.cast(step, "float32")
        warmup = self.peak * step / max(1, self.warmup_steps)
        decay = self._decay(step - self.warmup_steps)
        return keras.ops.where(step < self.warmup_steps, warmup, decay)

    def get_config(self):
        return dict(
            peak=self.peak,
            total_steps=self.total_steps,
            warmup_steps=self.warmup_steps,
            micro_batches=self.micro_batches,
        )


@dataclasses.dataclass(frozen=True)
class AdamWSettings:
    """AdamW's settings besides its learning rate (defaults: RoBERTa's for large batches)."""

    weight_decay: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.98
    epsilon: float = 1e-6
    clip_norm: float | None = 1.0
    update_clipping: bool = False  # StableAdamW's per-tensor clip of the update

    @classmethod
    def of(cls, flags) -> AdamWSettings:
        """A pretraining run's, from its optimizer flags (trainer/pretraining/config.py
        `OptimizerFlags`)."""
        return cls(
            flags.weight_decay,
            flags.adam_beta1,
            flags.adam_beta2,
            flags.adam_epsilon,
            flags.clip_norm,
            flags.update_clipping == "on",
        )


def build_optimizer(
    peak_learning_rate: float,
    total_steps: int,
    warmup_steps: int,
    adamw: AdamWSettings = AdamWSettings(),
    grad_accum_steps: int = 1,
    decay: tuple[int, int] | None = None,
):
    """Keras AdamW on the schedule, no decay on biases/LayerNorm, global-norm clipping (of
    the global gradient, also over several replicas: `backends.adamw_class`), one update
    per `grad_accum_steps` micro-batches. `decay`: None for linear decay from the warmup's
    end to `total_steps`, else (start, updates) of a warmup-stable-decay schedule's 1 - sqrt
    decay."""
    if decay is None:
        schedule = WarmupLinearDecay(
            peak_learning_rate, total_steps, warmup_steps, grad_accum_steps
        )
    else:
        schedule = WarmupStableDecay(peak_learning_rate, warmup_steps, *decay, grad_accum_steps)
    optimizer = backends.adamw_class()(
        learning_rate=schedule,
        update_clipping=adamw.update_clipping,
        weight_decay=adamw.weight_decay,
        beta_1=adamw.beta_1,
        beta_2=adamw.beta_2,
        epsilon=adamw.epsilon,
        global_clipnorm=adamw.clip_norm or None,
        gradient_accumulation_steps=grad_accum_steps if grad_accum_steps > 1 else None,
    )
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    return optimizer
