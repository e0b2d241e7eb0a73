"""A vector-Jacobian product on the active Keras backend: the one piece of differentiation
that `keras.ops` does not offer (Keras trains through each backend's own autodiff).

`vjp(fn, primals, cotangent)` runs `fn(primals) -> (output, aux)` and returns the output,
the aux and the gradient of `sum(output * cotangent)` with respect to each primal: with a
scalar output and cotangent 1.0 that is the output's gradient, with a model's output and the
gradient a loss has with respect to it, the model's share of the loss's gradient (what
gradient caching, trainer/finetuning/contrastive.py, sums over chunks). JAX: `jax.vjp`;
TensorFlow: a `tf.GradientTape` over the primals (as tensors), gradients that do not depend
on a primal as zeros, and sparse ones (an embedding table's `IndexedSlices`) made dense, as
JAX gives them.

Example:
    >>> output, aux, (dx, dy) = vjp(lambda v: (ops.sum(v[0] * v[1]), None), [x, y], 1.0)
"""

from __future__ import annotations

import keras


def vjp(fn, primals: list, cotangent):
    """(output, aux, [gradient per primal]) of `fn(primals) -> (output, aux)`; `cotangent`
    has the output's shape (a Python float for a scalar output) and is cast to its dtype."""
    if keras.backend.backend() == "jax":
        return _jax_vjp(fn, primals, cotangent)
    if keras.backend.backend() == "tensorflow":
        return _tensorflow_vjp(fn, primals, cotangent)
    raise NotImplementedError(f"no vjp for the {keras.backend.backend()} backend")


def _jax_vjp(fn, primals, cotangent):
    import jax
    import jax.numpy as jnp

    output, pullback, aux = jax.vjp(fn, list(primals), has_aux=True)
    (gradients,) = pullback(jnp.asarray(cotangent, output.dtype))
    return output, aux, gradients


def _tensorflow_vjp(fn, primals, cotangent):
    import tensorflow as tf

    primals = [tf.convert_to_tensor(value) for value in primals]
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(primals)
        output, aux = fn(primals)
    gradients = tape.gradient(
        output,
        primals,
        output_gradients=tf.cast(cotangent, output.dtype),
        unconnected_gradients=tf.UnconnectedGradients.ZERO,
    )
    return output, aux, [tf.convert_to_tensor(gradient) for gradient in gradients]
