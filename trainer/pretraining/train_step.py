"""The Keras model that trains a keras-hub MaskedLM on raw token batches, on any backend.

`fit` feeds it `{input_ids, attention_mask, step, row}` straight from the shards (`step` and
`row`, per example the batch's step and the example's place in the global batch, come from
the input pipeline: `trainer.data.splits`); `call` masks them inside the compiled step with keys
from (seed, step, row) and runs the MaskedLM on the fixed-size `mask_positions`, so the vocabulary
projection only runs on the ~15 % masked slots. Evaluation batches carry no `step`: their
masks are keyed by each row's tokens, so every evaluation of every run scores the same masks.

Keras' own train and test steps do the rest (`compute_loss`, `compute_metrics` are the only
overrides), so one class serves TensorFlow (tf.function + XLA, tf.distribute) and JAX (jit,
keras.distribution) alike. The step and row travel with the data rather than being read from
`optimizer.iterations` because under JAX the forward pass is a stateless function of the
model's own variables only.

Example:
    >>> masked_lm = build_masked_lm("roberta", config)
    >>> model = MaskedLMTrainer(masked_lm, MaskingSpec(vocab_size, mask_id, special_ids))
    >>> model.compile(optimizer=build_optimizer(...), jit_compile=True)
    >>> model.fit(train_batches, validation_data=eval_batches, steps_per_epoch=1000)
"""

from __future__ import annotations

import dataclasses

import keras
from keras import ops

from common import schema
from trainer import families
from trainer.data.data_order import ROW, STEP  # the keys a training batch has besides FEATURES
from trainer.data.masking import MaskingSpec, content_keys, mask_tokens, train_keys


class Perplexity(keras.metrics.Mean):
    """exp(mean masked-token cross-entropy): a `Mean` of every masked slot's loss weighted by
    its mask weight, exponentiated on read (keras_hub's Perplexity would recompute the loss
    from the logits). `mean_loss()` is the unexponentiated mean, which the logs report as
    the loss."""

    def mean_loss(self):
        return super().result()

    def result(self):
        return ops.exp(self.mean_loss())


class MaskedLMTrainer(keras.Model):
    """Wraps a keras-hub `RobertaMaskedLM`/`BertMaskedLM`; masks inside the compiled step.

    Args:
        masked_lm: the keras-hub task (no preprocessor); its weights are what gets saved.
        spec: a `MaskingSpec` (vocabulary size, special ids, rates).
        seed: masking seed for training (combined with step and row).
        eval_seed: masking seed for evaluation (combined with each row's tokens).
    """

    def __init__(
        self, masked_lm, spec: MaskingSpec, seed: int = 0, eval_seed: int = 1234, **kwargs
    ):
        super().__init__(**kwargs)
        self.masked_lm = masked_lm
        self.spec = spec  # evaluation's, and training's until `use_rate` changes the rate
        self.train_spec = spec
        # The compiled train step of each masking rate used (--phases): the rate is fixed
        # when a step is traced, so a phase at another rate gets its own step, and a rate
        # seen before reuses its own (one compiled step per distinct rate at most).
        self._steps_by_rate = {}
        self.mask_seed = seed
        self.eval_seed = eval_seed
        self.family = families.of_model(masked_lm)
        # A Loss object: under tf.distribute it scales by 1/replicas as Keras expects.
        self._cross_entropy = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"
        )
        self.accuracy = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
        self.perplexity = Perplexity(name="perplexity")

    def mask(self, inputs: dict) -> dict:
        """The masked batch: training keys when the batch carries its step, else content."""
        ids = ops.cast(inputs[schema.INPUT_IDS], "int32")
        if STEP in inputs:
            keys = train_keys(self.mask_seed, ops.cast(inputs[STEP], "int32"), inputs[ROW])
            spec = self.train_spec
        else:
            keys, spec = content_keys(self.eval_seed, ids), self.spec
        return mask_tokens(ids, inputs[schema.ATTENTION_MASK], keys, spec)

    def use_rate(self, rate: float) -> None:
        """Masks training batches at `rate` from the next `fit` on (--phases); evaluation
        keeps the run's own rate, so its loss compares across phases."""
        if rate == self.train_spec.rate:
            return
        if self.train_function is not None:
            self._steps_by_rate[self.train_spec.rate] = self.train_function
        self.train_spec = dataclasses.replace(self.train_spec, rate=rate)
        # None: Keras traces and compiles the step for this rate at the next `fit`.
        self.train_function = self._steps_by_rate.get(rate)
        if self.train_function is None:
            # A new function to trace: JAX caches traces by the traced function (Keras jits
            # the bound `train_step`, equal across rates), which would hand back the step
            # traced at the earlier rate.
            step = type(self).train_step
            self.train_step = lambda *args: step(self, *args)

    def compile(self, *args, **kwargs):
        """Keras' compile; a new compilation (other steps per call) makes steps anew."""
        self._steps_by_rate.clear()
        super().compile(*args, **kwargs)

    def call(self, inputs, training=False):
        """`{logits, mask_ids, mask_weights}` at the masked slots of a raw batch."""
        masked = self.mask(inputs)
        features = self.family.inputs(
            masked["token_ids"], masked["padding_mask"], masked["mask_positions"], ops.zeros_like
        )
        logits = self.masked_lm(features, training=training)
        return {
            "logits": ops.cast(logits, "float32"),
            "mask_ids": masked["mask_ids"],
            "mask_weights": masked["mask_weights"],
        }

    def outside_vocabulary(self, x):
        """Whether the batch holds an id the model has no row for (data that lies).

        Such ids must make the loss NaN on every backend, so that the run stops
        (callbacks.StopOnNonFiniteLoss): left alone, an out-of-range target scored 0.0 on JAX
        (its sparse cross-entropy multiplies the log-probabilities by `one_hot(target)`,
        all zeros for such a target, and XLA turns that product into a select that drops
        the NaN logits), and TensorFlow's XLA clamps an out-of-range embedding lookup."""
        ids = x[schema.INPUT_IDS]
        return ops.any(ops.logical_or(ids < 0, ids >= self.spec.vocab_size))

    def _poisoned(self, x, loss):
        return ops.where(self.outside_vocabulary(x), float("nan"), loss)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = self._cross_entropy(
            y_pred["mask_ids"], y_pred["logits"], sample_weight=y_pred["mask_weights"]
        )
        return self._poisoned(x, loss)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        weights = y_pred["mask_weights"]
        per_slot = keras.losses.sparse_categorical_crossentropy(
            y_pred["mask_ids"], y_pred["logits"], from_logits=True
        )
        self.perplexity.update_state(self._poisoned(x, per_slot), sample_weight=weights)
        self.accuracy.update_state(y_pred["mask_ids"], y_pred["logits"], sample_weight=weights)
        return self.get_metrics_result()

    def get_metrics_result(self):
        """Keras' results with "loss" the mean over every masked token of the pass.

        Keras' own loss tracker averages batch means weighted by rows; under TensorFlow's
        MirroredStrategy it also counted updates that no batch made (a zero loss with a
        full batch's weight on some replicas: the first evaluation of a two-replica run read
        3.71-4.12 for 4.63, same weights, same accuracy). Token-weighted sums carry no
        such update and give every replica count and batch split the one-device value."""
        results = super().get_metrics_result()
        results["loss"] = self.perplexity.mean_loss()
        return results
