"""The accelerator paths of the compiled step, checked on a CPU: bf16 matrix products under
mixed precision, keras-hub's attention reaching `ops.dot_product_attention` (cuDNN's fused
kernel on a GPU) once its attention dropout is off, and Keras' JAX step donating its state.

Nothing here needs a GPU: the lowered program is what the GPU would run, and a float32
operand of a dot in it would be a silent fall back to the slow path."""

import os
import re

import keras
import numpy as np
import pytest

from common import schema
from trainer import families
from trainer.data.masking import MaskingSpec
from trainer.models import model
from trainer.pretraining.train_step import ROW, STEP, MaskedLMTrainer
from trainer.training.optimizer import build_optimizer

VOCAB, LENGTH, BATCH = 100, 32, 4
TINY = {"num_layers": 2, "num_heads": 2, "hidden_dim": 32, "intermediate_dim": 64}
ROBERTA = families.get("roberta")


@pytest.fixture
def mixed_bfloat16():
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    yield
    keras.mixed_precision.set_dtype_policy("float32")


def _trainer(fused: bool):
    config = model.backbone_config(ROBERTA, "tiny", VOCAB, LENGTH, TINY)
    masked_lm = model.build_masked_lm(ROBERTA, config)
    model.bf16_lm_head(masked_lm)
    if fused:
        assert model.fuse_attention(masked_lm) == TINY["num_layers"]
    trainer = MaskedLMTrainer(masked_lm, MaskingSpec(VOCAB, 4, (0, 1, 2, 3, 4)))
    trainer(_batch())
    return trainer


def _batch() -> dict:
    ids = np.random.default_rng(0).integers(5, VOCAB, (BATCH, LENGTH)).astype("int32")
    return {
        schema.INPUT_IDS: ids,
        schema.ATTENTION_MASK: np.ones_like(ids),
        STEP: np.zeros(BATCH, "int32"),
        ROW: np.arange(BATCH, dtype="int32"),
    }


@pytest.mark.parametrize("fused", [True, False])
def test_keras_hub_attention_reaches_dot_product_attention_only_without_its_dropout(
    monkeypatch, fused
):
    from keras.src import ops as keras_ops  # what keras' MultiHeadAttention calls

    calls = []
    original = keras_ops.dot_product_attention
    monkeypatch.setattr(
        keras_ops, "dot_product_attention", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    trainer = _trainer(fused)
    calls.clear()
    trainer(_batch(), training=True)
    # One call per encoder layer when fused; with dropout Keras computes the scores itself.
    assert len(calls) == (TINY["num_layers"] if fused else 0)


def test_fused_attention_hands_the_attention_op_a_full_padding_mask(monkeypatch):
    """cuDNN's fused kernel refuses a (batch, 1, 1, key) mask; the outputs stay the same."""
    from keras.src import ops as keras_ops

    masks = []
    original = keras_ops.dot_product_attention
    monkeypatch.setattr(
        keras_ops,
        "dot_product_attention",
        lambda *a, **k: masks.append(tuple(k["mask"].shape)) or original(*a, **k),
    )
    config = model.backbone_config(ROBERTA, "tiny", VOCAB, LENGTH, TINY)
    backbone = model.build_masked_lm(ROBERTA, config).backbone
    ids = _batch()[schema.INPUT_IDS]
    padding = (np.arange(LENGTH)[None, :] < np.array([[LENGTH], [20], [7], [1]])).astype("int32")
    inputs = {"token_ids": ids, "padding_mask": padding}
    before = keras.ops.convert_to_numpy(backbone(inputs))
    assert model.fuse_attention(backbone) == TINY["num_layers"] and not masks
    after = keras.ops.convert_to_numpy(backbone(inputs))
    assert masks == [(BATCH, 1, LENGTH, LENGTH)] * TINY["num_layers"]
    valid = padding.astype(bool)
    np.testing.assert_allclose(after[valid], before[valid], atol=2e-5)


def _lowered_train_step(trainer) -> str:
    """The StableHLO of Keras' own jitted train step (the function `fit` calls)."""
    trainer.compile(optimizer=build_optimizer(1e-3, 100, 10), jit_compile=True)
    trainer.optimizer.build(trainer.trainable_variables)
    trainer.make_train_function()
    cells = [c.cell_contents for c in trainer.train_function.__closure__ or ()]
    jitted = next(c for c in cells if hasattr(c, "lower"))
    state = trainer._get_jax_state(
        trainable_variables=True,
        non_trainable_variables=True,
        optimizer_variables=True,
        metrics_variables=True,
    )
    return jitted.lower(state, _batch()).as_text()


_DOT = re.compile(
    r"stablehlo\.(?:dot_general|convolution)\b.*: \(tensor<([^>]*)>, "
    r"tensor<([^>]*)>\)"
)
_BF16_ALGORITHM = "lhs_precision_type = bf16, rhs_precision_type = bf16"


def _product_types(text: str) -> list[str]:
    """The element type each floating-point matrix product of the program multiplies in:
    its operands' type, or the one its `algorithm` names (JAX's attention gives the
    float32 gradient of its scores to a product with bf16 inputs that way)."""
    types = []
    for line in text.splitlines():
        found = _DOT.search(line)
        if not found:
            continue
        operands = {t.rsplit("x", 1)[-1] for t in found.groups()}
        if not operands & {"f32", "bf16", "f16", "f64"}:
            continue  # integer products of the masking
        types.append("bf16" if _BF16_ALGORITHM in line else "/".join(sorted(operands)))
    return types


@pytest.mark.skipif(os.environ.get("KERAS_BACKEND") != "jax", reason="reads JAX's lowering")
def test_the_compiled_jax_step_multiplies_in_bf16_and_donates_its_state(mixed_bfloat16):
    trainer = _trainer(fused=True)
    text = _lowered_train_step(trainer)
    types = _product_types(text)
    # Forward, backward and the LM head: about 50 products for two layers, all in bf16.
    assert len(types) > 20 and set(types) == {"bf16"}, sorted(set(types))
    # Keras jits the step with donate_argnums=0: the weights and the optimizer's state are
    # updated in place, not copied (XLA aliases each donated input to an output).
    donated = len(re.findall(r"tf\.aliasing_output|jax\.buffer_donor", text))
    assert donated >= 2 * len(trainer.trainable_variables)
