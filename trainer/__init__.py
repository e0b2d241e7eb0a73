"""Keras 3 / keras-hub masked-language-model trainer (TPU, GPU, CPU)."""
