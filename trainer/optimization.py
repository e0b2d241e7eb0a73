"""AdamW with linear warmup then linear decay to zero, as BERT/RoBERTa pretraining uses.

Example:
    >>> optimizer = build_optimizer(peak_learning_rate=1e-4, total_steps=10_000,
    ...                             warmup_steps=500, weight_decay=0.01, clip_norm=1.0)
"""

from __future__ import annotations

import keras

# LayerNorm scale/offset and biases are not decayed (BERT, RoBERTa, HF `create_optimizer`);
# Keras matches these against variable names (`gamma`, `beta`, `bias`, `output_bias`...).
NO_DECAY_NAMES = ("bias", "gamma", "beta")


@keras.saving.register_keras_serializable(package="trainer")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak` over `warmup_steps`, then linear decay to 0 at
    `total_steps`. Keras ships warmup only with cosine decay, hence this small class; the
    decay half is Keras' own `PolynomialDecay(power=1)`.

    Example:
        >>> schedule = WarmupLinearDecay(1e-3, total_steps=100, warmup_steps=10)
        >>> float(schedule(5)), float(schedule(10)), float(schedule(100))
        (0.0005, 0.001, 0.0)
    """

    def __init__(self, peak: float, total_steps: int, warmup_steps: int):
        self.peak = peak
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self._decay = keras.optimizers.schedules.PolynomialDecay(
            peak, decay_steps=max(1, total_steps - warmup_steps), end_learning_rate=0.0,
            power=1.0)

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warmup = self.peak * step / max(1, self.warmup_steps)
        decay = self._decay(step - self.warmup_steps)
        return keras.ops.where(step < self.warmup_steps, warmup, decay)

    def get_config(self):
        return dict(peak=self.peak, total_steps=self.total_steps,
                    warmup_steps=self.warmup_steps)


def build_optimizer(peak_learning_rate: float, total_steps: int, warmup_steps: int,
                    weight_decay: float = 0.01, beta_1: float = 0.9, beta_2: float = 0.98,
                    epsilon: float = 1e-6, clip_norm: float | None = 1.0):
    """Keras AdamW on the schedule, no decay on biases/LayerNorm, global-norm clipping."""
    optimizer = keras.optimizers.AdamW(
        learning_rate=WarmupLinearDecay(peak_learning_rate, total_steps, warmup_steps),
        weight_decay=weight_decay, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
        global_clipnorm=clip_norm or None)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    return optimizer
