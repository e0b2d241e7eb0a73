"""Keras 3 / keras-hub masked-language-model trainer (TPU, GPU, CPU; TensorFlow or JAX)."""

import os

from trainer import keras_backend

# Keras reads its backend once, at first import: choose it before any submodule imports keras.
keras_backend.choose()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # TensorFlow's C++ INFO lines: not for users

from trainer import quiet  # noqa: E402  (after the backend is chosen)

quiet.import_tensorflow()  # tf.data feeds `fit` on both backends
