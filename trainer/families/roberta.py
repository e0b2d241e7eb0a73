"""RoBERTa (keras-hub RobertaBackbone / RobertaMaskedLM <-> transformers RobertaForMaskedLM)."""

from __future__ import annotations

import numpy as np

from trainer.families.family import Family
from trainer.families.encoder_weights import copy, hf_common_config, transpose


def _positions(weight, ctx):
    # HF RoBERTa numbers positions from pad_id + 1 (pad tokens get position pad_id), so its
    # table has pad_id + 1 leading rows that keras-hub's table does not have.
    return np.concatenate([np.zeros((ctx.pad_id + 1, weight.shape[1]), weight.dtype), weight])


def _zero_token_type(weight, ctx):
    # HF RoBERTa adds token_type_embeddings[0] to every token; keras-hub RoBERTa has none.
    return np.zeros((1, ctx.hidden_dim), np.float32)


ROWS = (
    ("embeddings/token_embedding/embeddings", "roberta.embeddings.word_embeddings.weight", copy),
    ("embeddings/position_embedding/embeddings", "roberta.embeddings.position_embeddings.weight",
     _positions),
    (None, "roberta.embeddings.token_type_embeddings.weight", _zero_token_type),
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
        **hf_common_config(backbone_config, ids), hidden_act="gelu", layer_norm_eps=1e-5,
        type_vocab_size=1,
        max_position_embeddings=backbone_config["max_sequence_length"] + ids["pad_token"] + 1,
        architectures=["RobertaForMaskedLM"])


FAMILY = Family(name="roberta", backbone_class="RobertaBackbone", task_class="RobertaMaskedLM",
                registered_name="keras_hub>RobertaBackbone", takes_segment_ids=False,
                hf_config=hf_config, weight_rows=ROWS, hf_prefix="roberta",
                classifier_class="RobertaTextClassifier")
