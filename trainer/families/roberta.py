"""RoBERTa (keras-hub RobertaBackbone / RobertaMaskedLM <-> transformers RobertaForMaskedLM)."""

from __future__ import annotations

import numpy as np

import trainer.families.activation as activation
from trainer.families.encoder_weights import (
    ENCODER_LAYER,
    HF_COMPUTED,
    common_backbone_config,
    copy,
    hf_common_config,
    inverse_of,
    transpose,
)
from trainer.families.family import SET_BY_TRAINER, Family

TOKEN_TYPE = "roberta.embeddings.token_type_embeddings.weight"


def _positions(weight, ctx):
    # HF RoBERTa numbers positions from pad_id + 1 (pad tokens get position pad_id), so its
    # table has pad_id + 1 leading rows that keras-hub's table does not have.
    return np.concatenate([np.zeros((ctx.pad_id + 1, weight.shape[1]), weight.dtype), weight])


def _zero_token_type(weight, ctx):
    # HF RoBERTa adds token_type_embeddings[0] to every token; keras-hub RoBERTa has none.
    return np.zeros((1, ctx.hidden_dim), np.float32)


@inverse_of(_positions)
def _positions_back(weight, ctx):
    # The leading rows are read only at pad positions (whose outputs are nobody's), and the
    # token-type row that HF adds to every token is added to every position instead: the
    # same sum reaches the embedding layer norm, so the outputs are unchanged.
    return weight[ctx.pad_id + 1 :] + ctx.hf[TOKEN_TYPE][0]


@inverse_of(_zero_token_type)
def _token_type_back(weight, ctx):
    return None  # folded into the positions (above): no keras-hub variable holds it


ROWS = (
    ("embeddings/token_embedding/embeddings", "roberta.embeddings.word_embeddings.weight", copy),
    (
        "embeddings/position_embedding/embeddings",
        "roberta.embeddings.position_embeddings.weight",
        _positions,
    ),
    (None, TOKEN_TYPE, _zero_token_type),
    ("embeddings_layer_norm/gamma", "roberta.embeddings.LayerNorm.weight", copy),
    ("embeddings_layer_norm/beta", "roberta.embeddings.LayerNorm.bias", copy),
    ("mlm_head/intermediate_dense/kernel", "lm_head.dense.weight", transpose),
    ("mlm_head/intermediate_dense/bias", "lm_head.dense.bias", copy),
    ("mlm_head/intermediate_layer_norm/gamma", "lm_head.layer_norm.weight", copy),
    ("mlm_head/intermediate_layer_norm/beta", "lm_head.layer_norm.bias", copy),
    ("mlm_head/output_bias", "lm_head.bias", copy),
)


def hf_config(backbone_config: dict, ids: dict):
    from transformers import RobertaConfig

    return RobertaConfig(
        **hf_common_config(backbone_config, ids),
        hidden_act=activation.hf_name(backbone_config, "gelu"),
        layer_norm_eps=1e-5,
        type_vocab_size=1,
        max_position_embeddings=backbone_config["max_sequence_length"] + ids["pad_token"] + 1,
        architectures=["RobertaForMaskedLM"],
    )


def backbone_config(hf: dict) -> dict:
    """The inverse of `hf_config`: positions start after the pad id (pad_id + 1 rows)."""
    return dict(
        common_backbone_config(hf),
        max_sequence_length=hf["max_position_embeddings"] - hf["pad_token_id"] - 1,
        **activation.of_hf(hf, "gelu"),
    )


FAMILY = Family(
    name="roberta",
    backbone_class="RobertaBackbone",
    task_class="RobertaMaskedLM",
    registered_name="keras_hub>RobertaBackbone",
    takes_segment_ids=False,
    hf_config=hf_config,
    weight_rows=ROWS,
    hf_prefix="roberta",
    backbone_config_of=backbone_config,
    classifier_class="RobertaTextClassifier",
    layer_rows=ENCODER_LAYER,
    hf_masked_lm_class="RobertaForMaskedLM",
    tied={
        "lm_head.decoder.weight": "roberta.embeddings.word_embeddings.weight",
        "lm_head.decoder.bias": "lm_head.bias",
    },
    not_mlm=("roberta.pooler.",),
    hub_checkpoint="FacebookAI/roberta-base",
    hub_vocabulary=50265,
    preset_tokenizer=("keras_hub>RobertaTokenizer", "bpe"),
    pair_separators=2,
    positions="absolute",
    hf_positions_after_pad=True,
    legacy_configs={"roberta-base": "base", "roberta-large": "large"},
    set_by_trainer=SET_BY_TRAINER,
    hf_computed=HF_COMPUTED,
)
