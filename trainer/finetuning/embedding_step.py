"""The compiled step of contrastive fine-tuning and the compiled embedding of a batch, on the
active Keras backend.

The loss of a batch depends on every row's vector at once (in-batch negatives), which
`model.fit`'s per-example losses cannot express, and gradient caching runs the model three
times in one step: so the step is ours, written once over `contrastive` (`batch_gradient`, or
`cached_gradient` when a chunk is given) and compiled per backend:

- JAX: a pure function of (trainable, non-trainable, optimizer) values, `jax.jit`-ed with the
  state donated; `optimizer.stateless_apply` updates. The values live in `Trainer.state` and
  go back into the Keras variables at `sync()` (before an export or `get_weights`). With
  several devices (Keras' DataParallel) each batch is laid out by the distribution's data
  layout and XLA splits the work; the loss sees the whole batch's vectors.
- TensorFlow: a `tf.function` (XLA when `jit`) that reads the variables, applies the Keras
  optimizer and assigns the non-trainable values (dropout's seeds) after the step. One device:
  under a `tf.distribute` strategy each replica would see only its own rows as negatives.

A new bucket shape compiles a new program once (`embedding_data.buckets`).

Example:
    >>> trainer = Trainer(model, optimizer, chunk=None, temperature=0.05, jit=True)
    >>> loss = trainer.step(queries, documents)
    >>> vectors = trainer.embed(features)
"""

from __future__ import annotations

import functools

import keras
import numpy as np

from common.errors import UserError
from trainer.finetuning import contrastive


def _gradient_fn(chunk: int | None, temperature: float):
    loss = functools.partial(contrastive.info_nce, temperature=temperature)
    if chunk is None:
        return functools.partial(contrastive.batch_gradient, loss=loss)
    return functools.partial(contrastive.cached_gradient, chunk_size=chunk, loss=loss)


class Trainer:
    """One embedding model and its optimizer, stepped by the backend's compiled functions."""

    def __init__(self, model, optimizer, chunk, temperature: float, jit: bool, replicas: int = 1):
        self.model, self.optimizer = model, optimizer
        optimizer.build(model.trainable_variables)
        self.gradient = _gradient_fn(chunk, temperature)
        self.jax = keras.backend.backend() == "jax"
        if not self.jax and replicas > 1:
            raise UserError(
                "contrastive fine-tuning runs on one device on TensorFlow (a strategy's "
                "replicas would each see their own rows as negatives): pass --strategy cpu, "
                "or use the JAX backend for several devices"
            )
        self.state = None
        if self.jax:
            self._jax_functions()
        else:
            self._tensorflow_functions(jit)

    def _jax_functions(self) -> None:
        import jax

        model, optimizer, gradient = self.model, self.optimizer, self.gradient

        def step(state, queries, documents):
            trainable, non_trainable, optimizer_values = state
            found = gradient(model, (trainable, non_trainable), queries, documents)
            trainable, optimizer_values = optimizer.stateless_apply(
                optimizer_values, found.gradients, trainable
            )
            return found.loss, (trainable, found.non_trainable, optimizer_values)

        def embed(state, inputs):
            trainable, non_trainable, _ = state
            return model.stateless_call(trainable, non_trainable, inputs, training=False)[0]

        self._step = jax.jit(step, donate_argnums=0)
        self._embed = jax.jit(embed)
        self.state = self._values()

    def _values(self) -> tuple:
        return (
            [v.value for v in self.model.trainable_variables],
            [v.value for v in self.model.non_trainable_variables],
            [v.value for v in self.optimizer.variables],
        )

    def _tensorflow_functions(self, jit: bool) -> None:
        import tensorflow as tf

        model, optimizer, gradient = self.model, self.optimizer, self.gradient

        def step(queries, documents):
            found = gradient(model, contrastive.current_values(model), queries, documents)
            optimizer.apply(found.gradients, model.trainable_variables)
            for variable, value in zip(model.non_trainable_variables, found.non_trainable):
                variable.assign(value)
            return found.loss

        self._step = tf.function(step, jit_compile=jit)
        self._embed = tf.function(lambda inputs: model(inputs, training=False), jit_compile=jit)

    def _placed(self, inputs: dict) -> dict:
        """JAX with several devices: the batch laid out as Keras' distribution lays data."""
        distribution = keras.distribution.distribution()
        if not self.jax or distribution is None:
            return inputs
        import jax

        return {
            name: jax.device_put(array, distribution.get_data_layout(array.shape).backend_layout)
            for name, array in inputs.items()
        }

    def step(self, queries: dict, documents: dict) -> float:
        """One update on a batch; returns its loss."""
        queries, documents = self._placed(queries), self._placed(documents)
        if self.jax:
            loss, self.state = self._step(self.state, queries, documents)
        else:
            loss = self._step(queries, documents)
        return float(keras.ops.convert_to_numpy(loss))

    def embed(self, inputs: dict) -> np.ndarray:
        inputs = self._placed(inputs)
        out = self._embed(self.state, inputs) if self.jax else self._embed(inputs)
        return np.asarray(keras.ops.convert_to_numpy(out), np.float32)

    def sync(self) -> None:
        """JAX: the state's values back into the Keras variables (TensorFlow's are already)."""
        if not self.jax:
            return
        trainable, non_trainable, optimizer_values = self.state
        for variables, values in (
            (self.model.trainable_variables, trainable),
            (self.model.non_trainable_variables, non_trainable),
            (self.optimizer.variables, optimizer_values),
        ):
            for variable, value in zip(variables, values):
                variable.assign(value)

    def weights(self) -> list:
        self.sync()
        return self.model.get_weights()

    def set_weights(self, weights: list) -> None:
        self.model.set_weights(weights)
        if self.jax:
            self.state = self._values()
