"""ModernBERT's model core: packed documents, the attention mask and paths, saving, training.

Runs on both backends (CI runs tests/trainer again with KERAS_BACKEND=jax)."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.trainer.families.modernbert_data import CLS, PAD, backbone, documents, hidden, inputs
from trainer.families.modernbert import attention
from trainer.families.modernbert.documents import PADDING_SEGMENT, document_ids
from trainer.families.modernbert.masked_lm import ModernBertMaskedLM

JAX = keras.config.backend() == "jax"


def test_document_ids_restart_positions_at_each_cls():
    ids = np.array([[7, 8, 3, CLS, 9, 3, CLS, 5, 6, 3, PAD, PAD], [CLS, 5, 3] + [PAD] * 9])
    segments, positions = document_ids(ids, ids != PAD, separator_id=CLS)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(segments),
        [[0, 0, 0, 1, 1, 1, 2, 2, 2, 2, -1, -1], [1, 1, 1] + [PADDING_SEGMENT] * 9],
    )
    # the row's first, cut-off document starts at 0 too
    np.testing.assert_array_equal(
        ops.convert_to_numpy(positions)[:, :10], [[0, 1, 2, 0, 1, 2, 0, 1, 2, 3], range(10)]
    )
    segments, positions = document_ids(ids, ids != PAD, separator_id=None)
    np.testing.assert_array_equal(ops.convert_to_numpy(positions), [range(12)] * 2)
    assert set(ops.convert_to_numpy(segments)[0]) == {0, PADDING_SEGMENT}


def test_a_document_sees_nothing_of_its_neighbours():
    """Replacing the middle document leaves the others' outputs unchanged, and a document's
    output is what it is alone at the start of a row (its positions restart); without
    `separator_id` the same change does reach them (the check can fail)."""
    model = backbone(separator_id=CLS, local_window=8)
    row = documents(20, 17, 15, length=64)
    other = row.copy()
    other[21:36] = np.random.default_rng(5).integers(5, 100, 15)  # inside the 2nd document
    out, changed = hidden(model, row)[0], hidden(model, other)[0]
    first, third = slice(0, 20), slice(37, 52)
    np.testing.assert_allclose(changed[first], out[first], atol=1e-5)
    np.testing.assert_allclose(changed[third], out[third], atol=1e-5)
    assert np.abs(changed[21:36] - out[21:36]).max() > 1e-2
    alone = np.full(64, PAD, "int32")
    alone[:15] = row[37:52]
    np.testing.assert_allclose(hidden(model, alone)[0, :15], out[third], atol=1e-5)

    one_document = backbone(separator_id=None, local_window=8)
    one_document.set_weights(model.get_weights())
    base, moved = hidden(one_document, row)[0], hidden(one_document, other)[0]
    assert np.abs(moved[third] - base[third]).max() > 1e-3


def test_padding_never_reaches_a_real_token():
    model = backbone()
    row = documents(30, length=40)
    junk = row.copy()
    junk[30:] = 77  # the same row with other ids under padding_mask 0
    with_junk = inputs(junk)
    with_junk["padding_mask"] = inputs(row)["padding_mask"]
    out = hidden(model, row)[0, :30]
    np.testing.assert_allclose(
        np.asarray(model.predict(with_junk, verbose=0))[0, :30], out, atol=1e-5
    )


def _qkv(batch=2, length=256, heads=2, dim=32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(batch, length, heads, dim)).astype("float32") for _ in range(3)]


def _packed_segments(length=256):
    rows = np.stack([documents(100, 90, length=length), documents(200, 56, length=length)])
    return ops.convert_to_numpy(document_ids(rows, rows != PAD, CLS)[0])


@pytest.mark.skipif(not JAX, reason="the Splash kernel is JAX's")
@pytest.mark.parametrize("window", [None, 128])
def test_splash_mask_and_kernel_match_the_portable_path(window):
    """The Splash kernel's static mask AND its segment ids materialise to the portable
    mask, and the kernel itself (Pallas interpret mode on CPU) gives the portable output."""
    from jax.experimental.pallas.ops.tpu import splash_attention as splash

    segments = _packed_segments()
    head = (
        splash.FullMask((256, 256))
        if window is None
        else splash.LocalMask((256, 256), (window // 2, window // 2), 0)
    )
    static = np.asarray(head[:, :])
    portable = ops.convert_to_numpy(attention.attention_mask(segments, window))[:, 0]
    for row, seg in zip(portable, segments):
        np.testing.assert_array_equal(static & (seg[:, None] == seg[None, :]), row)
    q, k, v = _qkv()
    expected = attention.portable_attention(q, k, v, attention.attention_mask(segments, window))
    got = attention.splash_attention(q, k, v, segments, window, interpret=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=2e-5)


@pytest.mark.skipif(not JAX, reason="jax.nn.dot_product_attention is JAX's")
def test_cudnn_call_with_the_mask_matches_the_portable_path():
    """The cuDNN path's call (mask as given to cuDNN), run by XLA off a GPU."""
    segments = _packed_segments()
    q, k, v = _qkv()
    mask = attention.attention_mask(segments, 128)
    expected = attention.portable_attention(q, k, v, mask)
    got = attention.jax_attention(q, k, v, mask, "xla")
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=2e-5)


def test_attention_paths_are_chosen_and_recorded():
    assert attention.choose_path("auto", 256, "float32", False) == "portable"
    assert attention.choose_path("auto", 256, "bfloat16", True) == "portable"
    if JAX:
        assert attention.choose_path("cudnn", 100, "float32", False) == "jax-xla"
        assert attention.choose_path("splash", 256, "float32", False) == "splash-interpret"
        with pytest.raises(ValueError, match="multiple of 128"):
            attention.choose_path("splash", 100, "float32", False)
        with pytest.raises(ValueError, match="attention dropout"):
            attention.choose_path("cudnn", 256, "bfloat16", True)
    else:
        with pytest.raises(ValueError, match="needs the JAX backend"):
            attention.choose_path("splash", 256, "float32", False)
    model = backbone()
    hidden(model, documents(10))
    assert model.attention_paths_used == ["portable"] * 3


@pytest.mark.slow
@pytest.mark.skipif(not JAX, reason="the fused paths are JAX's")
@pytest.mark.parametrize("path", ["splash", "cudnn"])
def test_backbone_on_a_fused_path_matches_portable(path):
    portable = backbone(separator_id=CLS, attention_path="portable")
    fused = backbone(separator_id=CLS, attention_path=path)
    fused.set_weights(portable.get_weights())
    row = np.stack([documents(100, 90, length=256), documents(200, 56, length=256)])
    real = row != PAD
    np.testing.assert_allclose(hidden(fused, row)[real], hidden(portable, row)[real], atol=1e-4)
    assert (
        fused.attention_paths_used == [f"{path}-interpret" if path == "splash" else "jax-xla"] * 3
    )


def test_initialisation_follows_transformers():
    model = backbone(num_layers=8, hidden_dim=128, intermediate_dim=512)
    layer = model.encoder_layers[1]
    for kernel, std in ((layer.attn.wqkv.kernel, 0.02), (layer.wo.kernel, 0.02 / 4)):
        values = ops.convert_to_numpy(kernel)
        assert np.abs(values).max() <= 2 * std + 1e-7
        assert 0.8 * std < values.std() < 0.95 * std  # a normal cut at 2 sigma has sd 0.88 sigma
    assert model.encoder_layers[0].attn_norm is None
    assert model.layer_types == ["full_attention", "sliding_attention", "sliding_attention"] * 2 + [
        "full_attention",
        "sliding_attention",
    ]
    assert model.token_embedding.input_dim == 128  # 100 padded to a multiple of 64


@pytest.mark.slow
def test_masked_lm_saves_and_reloads(tmp_path):
    masked_lm = ModernBertMaskedLM(backbone(separator_id=CLS))
    features = {**inputs(documents(10, 12, length=24)), "mask_positions": np.array([[1, 12]])}
    before = np.asarray(masked_lm.predict(features, verbose=0))
    assert before.shape == (1, 2, 128)
    masked_lm.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(np.asarray(loaded.predict(features, verbose=0)), before, atol=1e-6)
    assert loaded.backbone.separator_id == CLS
    import keras_hub

    masked_lm.save_to_preset(str(tmp_path / "preset"))
    preset = keras_hub.models.Backbone.from_preset(str(tmp_path / "preset"))
    assert type(preset).__name__ == "ModernBertBackbone"
    np.testing.assert_allclose(
        hidden(preset, features["token_ids"]),
        hidden(masked_lm.backbone, features["token_ids"]),
        atol=1e-6,
    )


@pytest.mark.slow
def test_trains_compiled_under_mixed_precision():
    """One XLA-compiled train step (TensorFlow jit_compile / JAX jit) under
    mixed_bfloat16: rotary positions run in float32, the loss is finite and moves."""
    masked_lm = ModernBertMaskedLM(backbone(separator_id=CLS, dtype="mixed_bfloat16"))
    masked_lm.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    rows = np.stack([documents(12, 20, seed=s, length=40) for s in range(4)])
    features = {**inputs(rows), "mask_positions": np.tile([[1, 5, 14, 20]], (4, 1))}
    labels = np.take_along_axis(rows, features["mask_positions"], axis=1)
    history = masked_lm.fit(features, labels, epochs=3, batch_size=4, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert masked_lm.backbone.encoder_layers[0].attn.rotary.compute_dtype == "float32"


@pytest.mark.slow
@pytest.mark.skipif(not JAX, reason="the Splash kernel is JAX's")
def test_splash_gradients_match_the_portable_path():
    """The kernel's backward (dq, dk, dv with segment ids), in interpret mode on CPU."""
    import jax

    segments = _packed_segments()[:1]
    q, k, v = _qkv(batch=1, heads=1)
    weights = np.random.default_rng(3).normal(size=q.shape).astype("float32")

    def loss(path):
        def f(q, k, v):
            if path == "splash":
                out = attention.splash_attention(q, k, v, segments, 128, interpret=True)
            else:
                mask = attention.attention_mask(segments, 128)
                out = attention.portable_attention(q, k, v, mask)
            return (out * weights).sum()

        return jax.grad(f, argnums=(0, 1, 2))(q, k, v)

    for got, expected in zip(loss("splash"), loss("portable")):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-4)
