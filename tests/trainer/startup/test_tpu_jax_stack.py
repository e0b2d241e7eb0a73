"""The JAX TPU stack (make venv-tpu-jax): jax[tpu] with the libtpu it pins, no TensorFlow,
Keras on JAX, a keras-hub masked LM that trains under XLA. Run here on the CPU (no TPU),
without a network, by `make test-tpu-jax`; skipped where libtpu is not installed (the
default stack)."""

import importlib.metadata as md
import os

import numpy as np
import pytest


def _installed(name: str):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


# The stack checks need libtpu; the Keras ones need only jax and KERAS_BACKEND=jax, so they also
# run on the default stack's JAX run.
needs_libtpu = pytest.mark.skipif(
    not (_installed("jax") and _installed("libtpu")),
    reason="needs the JAX TPU stack (make venv-tpu-jax)",
)
pytestmark = pytest.mark.skipif(
    not _installed("jax") or os.environ.get("KERAS_BACKEND") != "jax",
    reason="needs jax and KERAS_BACKEND=jax",
)


@needs_libtpu
def test_libtpu_is_the_one_jax_tpu_pins():
    requires = md.requires("jax") or []
    pinned = [r for r in requires if r.startswith("libtpu") and 'extra == "tpu"' in r]
    assert pinned and "==0.0.42.*" in pinned[0].replace(" ", ""), pinned
    assert md.version("libtpu") == "0.0.42.1" and md.version("jax") == "0.10.2"
    assert md.version("jaxlib") == "0.10.2"


@needs_libtpu
def test_the_stack_holds_no_tensorflow_but_keras_hub_and_grain():
    # keras-hub is installed without its dependencies (it declares tensorflow-text on Linux).
    for name in ("tensorflow", "tensorflow-cpu", "tensorflow-text", "tf-keras"):
        assert _installed(name) is None, name
    assert _installed("keras-hub") == "0.32.0" and _installed("grain") == "0.2.18"
    import keras_hub  # its optional TensorFlow imports fail quietly

    assert keras_hub.models.RobertaMaskedLM


@needs_libtpu
def test_jax_with_libtpu_finds_no_tpu_and_runs_on_the_cpu():
    import jax

    # jax imports the libtpu plugin at first use of a backend; with no TPU it logs that it
    # found none and falls back to the CPU (tpu/offline.sh checks the log for the query).
    assert {d.platform for d in jax.devices()} == {"cpu"}
    # It must fail for want of a TPU, not for libtpu's machine-wide lock held by another
    # process (the TensorFlow stack's smoke beside this one): then nothing here was checked.
    with pytest.raises(RuntimeError, match="TPU initialization failed"):
        jax.devices("tpu")


def test_keras_runs_on_jax():
    import keras

    assert keras.backend.backend() == "jax"
    x = keras.ops.convert_to_tensor(np.ones((2, 2), "float32"))
    assert type(x).__module__.startswith("jax")


def _tiny_masked_lm():
    import keras_hub

    backbone = keras_hub.models.RobertaBackbone(
        vocabulary_size=50,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=12,
        dropout=0.0,
    )
    return keras_hub.models.RobertaMaskedLM(backbone=backbone, preprocessor=None)


def _batch(n=16, length=12):
    # A repeating pattern with fixed mask positions: the labels are a function of the inputs,
    # so a few steps must lower the loss.
    tokens = np.tile(np.arange(4, 4 + length, dtype="int32"), (n, 1))
    positions = np.tile(np.array([1, 5, 9], "int32"), (n, 1))
    labels = np.take_along_axis(tokens, positions, axis=1)
    masked = tokens.copy()
    np.put_along_axis(masked, positions, 3, axis=1)  # 3 plays the mask token
    x = {
        "token_ids": masked,
        "padding_mask": np.ones_like(masked, bool),
        "mask_positions": positions,
    }
    return x, labels


def test_tiny_roberta_masked_lm_fits_under_jit_on_jax():
    import jax
    import keras

    keras.utils.set_random_seed(0)
    lm = _tiny_masked_lm()
    lm.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        jit_compile=True,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x, y = _batch()
    before = lm.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    history = lm.fit(x, y, batch_size=8, epochs=6, shuffle=False, verbose=0)
    after = lm.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    assert len(history.history["loss"]) == 6
    assert after < 0.5 * before, (before, after)
    # The weights are JAX arrays on the CPU: the step ran in jax, not in TensorFlow.
    value = lm.backbone.token_embedding.embeddings.value
    assert isinstance(value, jax.Array) and value.devices() == {jax.devices("cpu")[0]}
