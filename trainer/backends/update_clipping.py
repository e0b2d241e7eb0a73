"""StableAdamW's per-tensor update clipping, as an option of the trainer's AdamW.

Wortsman et al. 2023 ("Stable and low-precision training for large-scale vision-language
models", arXiv 2304.13013) port Adafactor's update clipping into AdamW: for each tensor,

    RMS_t = sqrt(mean(g_t^2 / max(v_hat_t, eps^2)))     v_hat_t: the bias-corrected second
    eta_t = lr_t / max(1, RMS_t)                          moment after this step's update

and both the Adam step and the decoupled weight decay of that tensor use eta_t (the algorithm
optimi's StableAdamW documents; ModernBERT's pretraining config names a StableAdamW). A tensor
whose gradient is large against its own history (a loss spike, a rare token's embedding row)
then takes a smaller step, without the global gradient clip shrinking every other tensor's.
The max with eps^2 keeps a tensor with a zero second moment (a row never seen before) from
dividing by zero.

Off, the optimizer is Keras' AdamW unchanged (same operations, same results); on, it has the
same variables, so a backup written with either loads into the other.

Example:
    >>> optimizer = AdamW(learning_rate=1e-3, update_clipping=True)
"""

from __future__ import annotations

import keras
from keras import ops


class UpdateClipping:
    """Mixin over a Keras AdamW class: `update_clipping=True` scales each tensor's rate (Adam
    step and weight decay) by 1 / max(1, RMS_t)."""

    def __init__(self, *args, update_clipping: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.update_clipping = bool(update_clipping)

    def _apply_weight_decay(self, variables):
        # With clipping the decay needs each tensor's clipped rate: `update_step` applies it.
        if not self.update_clipping:
            super()._apply_weight_decay(variables)

    def update_step(self, gradient, variable, learning_rate):
        if not self.update_clipping:
            return super().update_step(gradient, variable, learning_rate)
        rate = ops.divide(
            ops.cast(learning_rate, variable.dtype),
            ops.maximum(1.0, self._update_rms(gradient, variable)),
        )
        if self.weight_decay is not None and self._use_weight_decay(variable):
            decay = ops.cast(self.weight_decay, variable.dtype)
            self.assign_sub(variable, ops.multiply(variable, ops.multiply(decay, rate)))
        return super().update_step(gradient, variable, rate)

    def _update_rms(self, gradient, variable):
        """RMS_t of one tensor: its second moment as Adam is about to store it (v_t), bias
        corrected, against this step's gradient."""
        gradient = ops.cast(gradient, variable.dtype)
        square = ops.square(gradient)
        beta_2 = ops.cast(self.beta_2, variable.dtype)
        velocity = self._velocities[self._get_variable_index(variable)]
        v_t = ops.add(velocity, ops.multiply(ops.subtract(square, velocity), 1 - beta_2))
        step = ops.cast(self.iterations + 1, variable.dtype)
        v_hat = ops.divide(v_t, 1 - ops.power(beta_2, step))
        floor = ops.cast(self.epsilon**2, variable.dtype)
        return ops.sqrt(ops.mean(ops.divide(square, ops.maximum(v_hat, floor))))

    def get_config(self):
        config = super().get_config()
        # Only when on: the config of an unclipped optimizer stays Keras' AdamW's, which
        # `keras.optimizers.AdamW.from_config` reads.
        if self.update_clipping:
            config["update_clipping"] = True
        return config


# The registered name is what saved optimizers name: it stays as first saved, where the module is.
@keras.saving.register_keras_serializable(package="trainer.update_clipping")
class AdamW(UpdateClipping, keras.optimizers.AdamW):
    """Keras' AdamW with the update-clipping option (the JAX backend's optimizer; TensorFlow's
    adds its replica-aware clip on top: trainer/backends/tensorflow_optimizer.py)."""
