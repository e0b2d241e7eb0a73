"""The Keras model that trains a keras-hub MaskedLM on raw token batches.

`fit` feeds it `{input_ids, attention_mask}` straight from the shards; `train_step` masks
them on the accelerator (inside the compiled step, seeded by (seed, step, replica)) and runs
the MaskedLM on the fixed-size `mask_positions`, so the vocabulary projection only runs on
the ~15 % masked slots. `test_step` masks with a seed derived from the batch's tokens, so
every evaluation of every run scores the same masks.

Example:
    >>> masked_lm = build_masked_lm("roberta", config)
    >>> model = MaskedLMTrainer(masked_lm, MaskingSpec(vocab_size, mask_id, special_ids))
    >>> model.compile(optimizer=build_optimizer(...), jit_compile=True)
    >>> model.fit(train_batches, validation_data=eval_batches, steps_per_epoch=1000)
"""

from __future__ import annotations

import keras
import tensorflow as tf

from trainer import families
from trainer.masking import MaskingSpec, content_seed, mask_tokens, step_seed


class Perplexity(keras.metrics.Mean):
    """exp(mean masked-token cross-entropy); `Mean` of the loss, exponentiated on read
    (keras_hub's Perplexity would recompute the loss from the logits)."""

    def result(self):
        return keras.ops.exp(super().result())


class MaskedLMTrainer(keras.Model):
    """Wraps a keras-hub `RobertaMaskedLM`/`BertMaskedLM`; masks inside the train step.

    Args:
        masked_lm: the keras-hub task (no preprocessor); its weights are what gets saved.
        spec: a `MaskingSpec` (vocabulary size, special ids, rates).
        seed: masking seed for training (combined with step and replica).
        eval_seed: masking seed for evaluation (combined with the batch's tokens).
        xla_masking: compile the masking function on its own with XLA, for when the step
            itself is not (MirroredStrategy on logical CPUs, keras#19005): XLA and
            TensorFlow kernels draw different random streams, so masks then match a jit step.
    """

    def __init__(self, masked_lm, spec: MaskingSpec, seed: int = 0, eval_seed: int = 1234,
                 xla_masking: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.masked_lm = masked_lm
        self.spec = spec
        self.mask_seed = seed
        self.eval_seed = eval_seed
        self.family = families.of_model(masked_lm)
        self._mask_fn = tf.function(self._mask, jit_compile=True) if xla_masking else self._mask
        self._cross_entropy = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight")
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.accuracy = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
        self.perplexity = Perplexity(name="perplexity")

    @property
    def metrics(self):
        return [self.loss_tracker, self.accuracy, self.perplexity]

    def _mask(self, input_ids, attention_mask, seed):
        return mask_tokens(input_ids, attention_mask, seed, self.spec)

    def _features(self, masked: dict) -> dict:
        return self.family.inputs(masked["token_ids"], masked["padding_mask"],
                                  masked["mask_positions"], keras.ops.zeros_like)

    def call(self, inputs, training=False):
        """Logits at `mask_positions`. Also takes a raw `{input_ids, attention_mask}` batch
        (Keras builds losses and metrics symbolically from one and fails on a missing key): it
        then scores the first `max_predictions` positions."""
        if "token_ids" not in inputs:
            ids = keras.ops.cast(inputs["input_ids"], "int32")
            num_slots = self.spec.max_predictions(ids.shape[1])
            inputs = {"token_ids": ids,
                      "padding_mask": keras.ops.cast(inputs["attention_mask"], "int32"),
                      "mask_positions": keras.ops.zeros_like(ids[:, :num_slots])}
        return self.masked_lm(self._features(inputs), training=training)

    def _update_metrics(self, masked, logits, loss):
        self.loss_tracker.update_state(loss)
        self.perplexity.update_state(loss)
        self.accuracy.update_state(masked["mask_ids"], logits,
                                   sample_weight=masked["mask_weights"])
        return {m.name: m.result() for m in self.metrics}

    def _loss(self, masked, logits):
        return self._cross_entropy(masked["mask_ids"], logits,
                                   sample_weight=masked["mask_weights"])

    def train_step(self, data):
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        seed = step_seed(self.mask_seed, self.optimizer.iterations, replica)
        masked = self._mask_fn(data["input_ids"], data["attention_mask"], seed)
        with tf.GradientTape() as tape:
            logits = tf.cast(self.masked_lm(self._features(masked), training=True), tf.float32)
            loss = self._loss(masked, logits)
            # Gradients are summed over replicas: scale so the update uses the global mean.
            scaled = loss / tf.distribute.get_strategy().num_replicas_in_sync
            scaled = self.optimizer.scale_loss(scaled)
        variables = self.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(scaled, variables), variables))
        return self._update_metrics(masked, logits, loss)

    def test_step(self, data):
        seed = content_seed(self.eval_seed, data["input_ids"])
        masked = self._mask_fn(data["input_ids"], data["attention_mask"], seed)
        logits = tf.cast(self.masked_lm(self._features(masked), training=False), tf.float32)
        return self._update_metrics(masked, logits, self._loss(masked, logits))
