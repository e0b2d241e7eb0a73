"""Keras 3 / keras-hub masked-language-model trainer (TPU, GPU, CPU; TensorFlow or JAX)."""

import os

from trainer import keras_backend

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # TensorFlow's C++ INFO lines: not for users
# Keras reads its backend once, at first import: choose it before any submodule imports keras.
if keras_backend.choose() == "tensorflow":
    from trainer import quiet  # noqa: E402  (after the backend is chosen)

    # Imported here, its harmless start-up lines hidden; on JAX nothing of ours imports it
    # (a JAX machine may have no TensorFlow: tests/trainer/test_no_tensorflow.py).
    quiet.import_tensorflow()
