"""The only backend-specific code of the trainer: one module per Keras backend, chosen here
by the backend Keras was imported with (trainer/keras_backend.py chose it, once).

Example:
    >>> runtime = setup(config)   # a trainer.backends.runtime.Runtime
    >>> with runtime.scope():
    ...     model = build(...)
"""

from __future__ import annotations

import importlib

import keras

from trainer.backends.runtime import Runtime

MODULES = {"tensorflow": "trainer.backends.tensorflow_backend",
           "jax": "trainer.backends.jax_backend"}


def setup(config) -> Runtime:
    """The run's devices and processes on the active backend (imported on demand, so a
    TensorFlow run never imports JAX)."""
    return importlib.import_module(MODULES[keras.backend.backend()]).setup(config)
