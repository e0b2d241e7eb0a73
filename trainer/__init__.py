"""Keras 3 / keras-hub masked-language-model trainer (TPU, GPU, CPU)."""

import os

# Keras reads its backend once, at first import; the trainer is TensorFlow-only (tf.data,
# tf.distribute, TPUStrategy), so pin it before any submodule imports keras.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # TensorFlow's C++ INFO lines: not for users

from trainer import quiet  # noqa: E402  (after the backend is pinned)

quiet.import_tensorflow()
