"""The only backend-specific code of the trainer: one module per Keras backend, chosen here
by the backend Keras was imported with (trainer/startup/keras_backend.py chose it, once).

Example:
    >>> runtime = setup(DeviceRequest(strategy="cpu"))   # a trainer.backends.runtime.Runtime
    >>> with runtime.scope():
    ...     model = build(...)
"""

from __future__ import annotations

import contextlib
import importlib

import keras

from trainer.backends.devices import DeviceRequest
from trainer.backends.runtime import Runtime

MODULES = {
    "tensorflow": "trainer.backends.tensorflow_backend",
    "jax": "trainer.backends.jax_backend",
}


def setup(request: DeviceRequest) -> Runtime:
    """The run's devices and processes on the active backend (imported on demand, so a
    TensorFlow run never imports JAX)."""
    return importlib.import_module(MODULES[keras.backend.backend()]).setup(request)


def adamw_class() -> type:
    """The trainer's AdamW, both with the update-clipping option
    (trainer/backends/update_clipping.py): on TensorFlow Keras' AdamW that clips the replicas'
    summed gradient (`tensorflow_optimizer.py`: Keras clips each replica's share), on JAX Keras'
    own (its step computes the global batch's gradient, so the clip is global already)."""
    if keras.backend.backend() == "tensorflow":
        return importlib.import_module("trainer.backends.tensorflow_optimizer").AdamW
    return importlib.import_module("trainer.backends.update_clipping").AdamW


def model_replicas(model) -> int:
    """How many devices a built model's variables are replicated over: what the runtime's
    scope and distribution really gave the model (TensorFlow: its strategy's replicas; JAX:
    the devices of its variables' sharding)."""
    return importlib.import_module(MODULES[keras.backend.backend()]).model_replicas(model)


def replicate_predictions(model) -> None:
    """Makes `model.predict` on a JAX pod return every process's rows to every process (each
    gives its share of a batch); elsewhere `predict` already returns all of them."""
    if keras.backend.backend() == "jax":
        importlib.import_module(MODULES["jax"]).replicate_predictions(model)


def errors_end_pod_processes():
    """A context manager: on a pod (JAX, several processes), an error ends this process at
    once in one line (a lost peer named as such), without the shutdown that would wait for
    hosts that may never come; elsewhere nothing changes."""
    if keras.backend.backend() != "jax":
        return contextlib.nullcontext()
    return importlib.import_module(MODULES["jax"]).errors_end_pod_processes()


def peer_lost(err: BaseException) -> bool:
    """Whether `err` is another process of a pod going away (not, say, a bad file)."""
    if keras.backend.backend() != "jax":
        return False
    return importlib.import_module(MODULES["jax"]).peer_lost(err)
