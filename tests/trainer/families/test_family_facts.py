"""The facts each family's record says of itself (trainer/families/family.py): the backbone
arguments the trainer sets, the transformers config fields --init_from holds to the export's,
and model FLOPs per token; each checked for every registered family, so that a new family's
record must say its own."""

import json

import numpy as np
import pytest

from trainer import families
from trainer.families import flops
from trainer.models import init_from, model

IDS = {"pad_token": 0, "unk_token": 1, "cls_token": 2, "sep_token": 3, "mask_token": 4}
VOCAB = 1024  # a multiple of 64: ModernBERT's embedding has no spare rows
LENGTH = 256


def _roberta_or_bert_tiny() -> float:
    # 2 layers, hidden 128, intermediate 512: q, k, v, o and two feed-forward matrices per
    # layer, the head's transform; 15 % masking; every layer attends all 256 keys
    dense = 2 * (4 * 128 * 128 + 2 * 128 * 512) + 128 * 128
    return 6 * dense + 6 * 128 * VOCAB * 0.15 + 12 * 128 * (2 * LENGTH)


def _modernbert_tiny() -> float:
    # 2 layers, hidden 128, intermediate 192: GeGLU's Wi is 128 x 384 (input and gate), so
    # three 128 x 192 matrices; 30 % masking (its recipe); layer 0 global (256 keys), layer 1
    # local within ±64: 129 keys inside the row, 64 x 65 / 2 fewer within 64 of each end
    dense = 2 * (4 * 128 * 128 + 3 * 128 * 192) + 128 * 128
    local = (129 * LENGTH - 2 * (64 * 65 // 2)) / LENGTH
    return 6 * dense + 6 * 128 * VOCAB * 0.3 + 12 * 128 * (LENGTH + local)


# Counted by hand from each family's published layout, not from its record.
BY_HAND = {"roberta": _roberta_or_bert_tiny, "bert": _roberta_or_bert_tiny}
BY_HAND["modernbert"] = _modernbert_tiny


@pytest.mark.parametrize("name", families.NAMES)
def test_flops_per_token_of_a_tiny_model_are_the_count_by_hand(name):
    assert name in BY_HAND, f"count {name}'s FLOPs per token by hand in BY_HAND"
    record = families.get(name)
    config = model.backbone_config(record, "tiny", VOCAB, LENGTH, special_token_ids=IDS)
    assert record.flops_per_token(config, LENGTH) == pytest.approx(BY_HAND[name](), rel=1e-12)
    # a benchmark's own masking rate replaces the recipe's in the head's term only
    more = record.flops_per_token(config, LENGTH, mask_rate=1.0)
    rate = record.recipe_value("mlm_probability")
    assert more - record.flops_per_token(config, LENGTH) == pytest.approx(
        6 * 128 * VOCAB * (1.0 - rate)
    )


def test_the_base_sizes_count_what_docs_benchmarks_md_says():
    roberta, modernbert = families.get("roberta"), families.get("modernbert")
    # RoBERTa-base at 128: 6 x 85 M dense weights dominate; the head at 15 % and attention
    # add 6.8 % and 2.8 %
    config = model.backbone_config(roberta, "base", 50265, 128)
    dense = 12 * (4 * 768**2 + 2 * 768 * 3072) + 768**2
    assert flops.dense_weights(roberta, config) == dense
    per_token = roberta.flops_per_token(config, 128)
    assert per_token == 6 * dense + 6 * 768 * 50265 * 0.15 + 12 * 12 * 768 * 128
    assert 5.5e8 < per_token < 5.7e8
    # ModernBERT-base at 1024: 8 global layers (0, 3, ..., 21) see 1024 keys; 14 local ones
    # ±64 (129 inside the row, fewer within 64 of its ends: 129 - 4160 / 1024 on average)
    config = model.backbone_config(modernbert, "base", 50368, 1024)
    dense = 22 * (4 * 768**2 + 3 * 768 * 1152) + 768**2
    assert flops.dense_weights(modernbert, config) == dense
    keys = 8 * 1024 + 14 * (129 - 4160 / 1024)
    expected = 6 * dense + 6 * 768 * 50368 * 0.3 + 12 * 768 * keys
    assert modernbert.flops_per_token(config, 1024) == pytest.approx(expected)
    assert round(modernbert.flops_per_token(config, 1024) / 1e8, 2) == 8.27


def test_a_local_band_counts_the_keys_the_models_mask_lets_through():
    # where the band is shorter than the row, and where it is not
    band = np.abs(np.arange(300)[:, None] - np.arange(300)[None]) <= 64
    assert flops.keys_per_query(300, 128) == pytest.approx(band.sum() / 300)
    assert flops.keys_per_query(50, 128) == 50
    assert flops.keys_per_query(50, None) == 50


@pytest.mark.parametrize("name", families.NAMES)
def test_each_argument_the_trainer_sets_is_refused_in_config_in_one_line(name):
    record = families.get(name)
    # each is an argument of the backbone, and the tokenizer's ids fill in no other
    assert set(record.set_by_trainer) <= set(record.backbone_args())
    assert set(record.token_args(IDS)) <= set(record.set_by_trainer)
    for key, source in record.set_by_trainer.items():
        with pytest.raises(ValueError) as refused:
            model.check_overrides(record, "tiny", {key: 1})
        assert str(refused.value) == f"--config {key!r}: the trainer sets it from {source}"


@pytest.mark.parametrize("name", families.NAMES)
def test_a_transformers_config_that_changes_a_computed_field_is_refused_naming_it(name, tmp_path):
    pytest.importorskip("transformers")
    record = families.get(name)
    shape = {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"}
    assert shape <= set(record.hf_computed)
    config = record.hf_config(model.backbone_config(record, "tiny", VOCAB, 64), IDS).to_dict()
    # the first yes-or-no field the model cannot follow (a bias, the tied decoder...)
    key = next(k for k in record.hf_computed if isinstance(config.get(k), bool))
    (tmp_path / "config.json").write_text(json.dumps({**config, key: not config[key]}))
    with pytest.raises(init_from.InitFromError, match=key) as refused:
        init_from.resolve(str(tmp_path))
    assert "\n" not in str(refused.value)
