"""Keras 3 / keras-hub masked-language-model trainer (TPU, GPU, CPU; TensorFlow or JAX)."""

import importlib.util
import os

from trainer import keras_backend

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # TensorFlow's C++ INFO lines: not for users
# Keras reads its backend once, at first import: choose it before any submodule imports keras.
# TensorFlow is imported here, its harmless start-up lines hidden: on the TensorFlow backend,
# and on JAX where it is installed, because keras-hub imports it whenever it can
# (keras_hub/src/utils/tensor_utils.py). Nothing of ours needs it on JAX: where it is not
# installed, nothing imports it (tests/trainer/test_no_tensorflow.py).
from trainer import quiet  # noqa: E402  (imports neither Keras nor TensorFlow)

if keras_backend.choose() == "tensorflow" or importlib.util.find_spec("tensorflow"):
    quiet.import_tensorflow()
quiet.hide_grain_read_ahead_note()
