"""The trainer's AdamW on TensorFlow: global-norm clipping of the replicas' summed gradient.

Under `tf.distribute` (MirroredStrategy over GPUs or CPUs, TPUStrategy) Keras 3.15 runs the
optimizer once per replica: `BaseOptimizer._backend_apply_gradients` clips each replica's
gradient (a share of the global mean, the loss being scaled by 1/replicas) and only then does
`TFOptimizer._backend_update_step` sum them (`_all_reduce_sum_gradients`). So each share was
clipped to `global_clipnorm` on its own and the applied gradient was neither clipped to it
nor the one-device gradient. Here the sum comes first, inside `_clip_gradients`, and the later
sum is skipped: the clip then sees the gradient one device would see. One all-reduce per
update, as before (under accumulation `_clip_gradients` runs on the update step only).
On JAX the step computes the global batch's gradient, so Keras' clip is global already.
Also on one device: an embedding's gradient (IndexedSlices) is made dense before the norm,
which Keras computes wrongly for repeated rows.

The class name is in no file the trainer writes: `.weights.h5` files keep the optimizer's
variables by position (the same list as Keras' AdamW), and keras-hub presets hold no compile
config. Registered anyway, so a `.keras` file of a compiled model would load.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from trainer.backends.update_clipping import UpdateClipping


def _replica_context_to_sum():
    """The replica context when this runs on one of several replicas, else None (the default
    strategy, or a cross-replica context, where there is nothing to sum)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync <= 1:
        return None
    return context


@keras.saving.register_keras_serializable(package="trainer")
class AdamW(UpdateClipping, keras.optimizers.AdamW):
    """Keras' AdamW whose clipping acts on the all-reduced (global) gradient, with the
    update-clipping option (trainer/backends/update_clipping.py)."""

    def _clip_gradients(self, grads):
        context = _replica_context_to_sum()
        if context is not None:
            present = [g for g in grads if g is not None]
            summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
            grads = [None if g is None else next(summed) for g in grads]
        if self.global_clipnorm or self.update_clipping:
            # Keras' global norm squares an IndexedSlices' rows one by one: a row repeated
            # (a token twice in the batch, e.g. BERT's segment ids) counted |a|^2 + |b|^2,
            # not |a + b|^2. Dense, as JAX's gradients are; the update is dense anyway
            # (and update clipping's mean over the tensor needs every row).
            grads = [
                tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads
            ]
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # Called by `_backend_update_step` only, always after `_clip_gradients` summed them.
        if _replica_context_to_sum() is not None:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)
