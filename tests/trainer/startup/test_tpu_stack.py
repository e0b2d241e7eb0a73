"""The TPU stack (make venv-tpu) is one TensorFlow, the TPU build, with the libtpu it is built
against; skipped on the default stack."""

import importlib.metadata as md

import pytest


def _tpu_stack() -> bool:
    try:
        md.version("tensorflow-tpu")
    except md.PackageNotFoundError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _tpu_stack(), reason="the default (CPU/GPU) stack")


def test_one_tensorflow_the_tpu_build():
    import tensorflow as tf

    assert tf.__version__ == md.version("tensorflow-tpu") == "2.20.0"
    assert md.version("libtpu") == "0.0.14"
    # The `tensorflow` distribution is the empty marker of tpu/tensorflow-from-tpu: no module
    # of its own, so the `tensorflow` package imported above is tensorflow-tpu's.
    own = [str(f) for f in md.files("tensorflow") or [] if ".dist-info" not in str(f)]
    assert own == [] and md.requires("tensorflow") == ["tensorflow-tpu==2.20.0"]
    tpu_files = {str(f) for f in md.files("tensorflow-tpu")}
    assert "tensorflow/__init__.py" in tpu_files


def test_libtpu_is_loaded_and_finds_no_tpu_here():
    import tensorflow as tf

    assert tf.config.list_logical_devices("TPU") == []
