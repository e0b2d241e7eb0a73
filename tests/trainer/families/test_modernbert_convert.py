"""ModernBERT <-> transformers: logits parity both ways on both backends, the config fields
represented or refused, and the sliding window's boundary.

The reference is a tiny random transformers ModernBertForMaskedLM made offline (torch CPU,
float32, eager attention) on a padded batch 256 tokens long, so the local layers' 128-token
window cuts the rows."""

import keras
import numpy as np
import pytest

from common.errors import UserError
from trainer.families.modernbert import attention, convert
from trainer.families.modernbert.backbone import ModernBertBackbone
from trainer.families.modernbert.masked_lm import ModernBertMaskedLM

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LENGTH = 256
TOLERANCE = 1e-4


def _hf_config(**overrides):
    fields = dict(
        vocab_size=100,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=2,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
        cls_token_id=2,
        sep_token_id=3,
    )
    return transformers.ModernBertConfig(**{**fields, **overrides})


@pytest.fixture(scope="module")
def hf_model():
    """Every weight random (norm scales around 1), large enough that a wrong position, window
    or layout moves the logits far beyond the tolerance (a window of |i - j| < 64 instead of
    <= 64 moved them by 0.2)."""
    torch.manual_seed(0)
    config = _hf_config()
    config._attn_implementation = "eager"
    model = transformers.ModernBertForMaskedLM(config).eval()
    with torch.no_grad():
        for name, weight in model.named_parameters():
            scale = 0.1 if weight.ndim > 1 else 0.5
            weight.copy_(torch.randn_like(weight) * scale + name.endswith("norm.weight"))
    return model


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 100, (3, LENGTH)).astype("int32")
    padding = np.ones_like(ids)
    padding[1, 200:] = padding[2, 30:] = 0
    return np.where(padding == 1, ids, 0), padding


def _hf_logits(model, batch):
    ids, padding = batch
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids).long(), attention_mask=torch.tensor(padding))
    return out.logits.numpy()


def _our_logits(masked_lm, batch):
    ids, padding = batch
    positions = np.broadcast_to(np.arange(LENGTH, dtype="int32"), ids.shape)
    features = {"token_ids": ids, "padding_mask": padding, "mask_positions": positions}
    return keras.ops.convert_to_numpy(masked_lm(features))


def test_transformers_to_ours(hf_model, batch):
    ours = convert.from_transformers(hf_model)
    real = batch[1] == 1  # transformers' padding rows attend real tokens, ours only padding
    diff = np.abs(_our_logits(ours, batch) - _hf_logits(hf_model, batch))[real].max()
    print(f"{keras.config.backend()} transformers->ours max |logit diff| {diff:.2e}")
    assert diff <= TOLERANCE


def test_ours_to_transformers(batch):
    keras.utils.set_random_seed(1)
    ours = ModernBertMaskedLM(
        ModernBertBackbone(**convert.backbone_config(_hf_config())), compile=False
    )
    for variable in ours.weights:  # as large as the other direction's, norms around 1
        noise = np.random.default_rng(len(variable.path)).normal(size=variable.shape)
        base = 1.0 if variable.path.endswith("gamma") else 0.0
        scale = 0.1 if len(variable.shape) > 1 else 0.5
        variable.assign((base + scale * noise).astype("float32"))
    hf = convert.transformers_model(ours, {"pad_token": 0, "cls_token": 2, "sep_token": 3})
    real = batch[1] == 1
    diff = np.abs(_our_logits(ours, batch) - _hf_logits(hf, batch))[real].max()
    print(f"{keras.config.backend()} ours->transformers max |logit diff| {diff:.2e}")
    assert diff <= TOLERANCE
    assert hf.config.layer_types == ["full_attention", "sliding_attention", "sliding_attention"]
    assert hf.config.rope_parameters["full_attention"]["rope_theta"] == 160_000.0
    assert hf.config.rope_parameters["sliding_attention"]["rope_theta"] == 10_000.0
    assert hf.config.local_attention == 128 and hf.config.cls_token_id == 2


def test_band_is_transformers_sliding_window():
    """|i - j| <= local_attention // 2, transformers' own mask function: both ends included."""
    from transformers.masking_utils import sliding_window_bidirectional_overlay

    length, window = 200, 128
    index = np.arange(length)
    theirs = sliding_window_bidirectional_overlay(window // 2)(0, 0, index[:, None], index)
    ours = attention.attention_mask(np.zeros((1, length), "int32"), window)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(ours)[0, 0], theirs)
    assert theirs[0, 64] and not theirs[0, 65]


def test_config_round_trip_and_older_hub_fields():
    backbone = dict(
        vocabulary_size=50_280,
        num_layers=22,
        num_heads=12,
        hidden_dim=768,
        intermediate_dim=1152,
        global_attention_every=3,
    )
    hf = convert.hf_config(backbone)
    assert hf.vocab_size == 50_304  # padded to a multiple of 64
    back = convert.backbone_config(hf.to_dict())
    assert back["vocabulary_size"] == 50_304 and back["global_attention_every"] == 3
    assert {k: back[k] for k in ("num_layers", "hidden_dim", "intermediate_dim")} == {
        "num_layers": 22,
        "hidden_dim": 768,
        "intermediate_dim": 1152,
    }
    older = convert.backbone_config(
        {
            "model_type": "modernbert",
            "num_hidden_layers": 4,
            "global_attn_every_n_layers": 2,
            "global_rope_theta": 80_000.0,
            "local_rope_theta": 5_000.0,
            "vocab_size": 100,
        }
    )
    assert older["global_attention_every"] == 2
    assert (older["global_rope_theta"], older["local_rope_theta"]) == (80_000.0, 5_000.0)
    assert older["vocabulary_multiple"] == 1  # 100 stays 100


@pytest.mark.parametrize(
    "field, value",
    [
        ("hidden_activation", "gelu_pytorch_tanh"),
        ("classifier_activation", "silu"),
        ("norm_bias", True),
        ("attention_bias", True),
        ("mlp_bias", True),
        ("classifier_bias", True),
        ("decoder_bias", False),
        ("tie_word_embeddings", False),
        ("norm_eps", 1e-6),
        ("embedding_dropout", 0.1),
        ("layer_types", ["sliding_attention", "full_attention", "full_attention"]),
        ("rope_parameters", {"full_attention": {"rope_type": "linear", "factor": 2.0}}),
    ],
)
def test_config_fields_it_cannot_hold_are_refused_by_name(field, value):
    with pytest.raises(UserError, match=field) as error:
        convert.backbone_config(_hf_config(**{field: value}))
    assert "\n" not in str(error.value)


def test_sizes_have_transformers_parameter_counts():
    from trainer.families.modernbert.sizes import SIZES

    for size in ("tiny", "small"):
        ours = ModernBertMaskedLM(ModernBertBackbone(vocabulary_size=1000, **SIZES[size]))
        with torch.device("meta"):
            hf = transformers.ModernBertForMaskedLM(convert.hf_config(ours.backbone.get_config()))
        theirs = sum(p.numel() for n, p in hf.named_parameters() if n != "decoder.weight")
        assert ours.count_params() == theirs


def test_a_packed_document_gives_transformers_logits_for_it_alone(hf_model):
    """Three documents packed in one 256-token row (with `separator_id`): each one's logits
    are what transformers gives for that document alone in its own row."""
    from tests.trainer.families.modernbert_data import CLS, documents

    ours = convert.from_transformers(hf_model, separator_id=CLS)
    lengths = (100, 90, 50)
    row = documents(*lengths, length=LENGTH)
    packed = _our_logits(ours, (row[None], (row != 0).astype("int32")[None]))[0]
    start = 0
    for n in lengths:
        alone = np.zeros(LENGTH, "int32")
        alone[:n] = row[start : start + n]
        theirs = _hf_logits(hf_model, (alone[None], (alone != 0).astype("int32")[None]))[0, :n]
        assert np.abs(packed[start : start + n] - theirs).max() <= TOLERANCE
        start += n
