"""BERT (keras-hub BertBackbone / BertMaskedLM <-> transformers BertForMaskedLM)."""

from __future__ import annotations

import trainer.families.activation as activation
from trainer.families.encoder_weights import (
    ENCODER_LAYER,
    HF_COMPUTED,
    common_backbone_config,
    copy,
    hf_common_config,
    transpose,
)
from trainer.families.family import SET_BY_TRAINER, Family

ROWS = (
    ("token_embedding/embeddings", "bert.embeddings.word_embeddings.weight", copy),
    ("position_embedding/embeddings", "bert.embeddings.position_embeddings.weight", copy),
    ("segment_embedding/embeddings", "bert.embeddings.token_type_embeddings.weight", copy),
    ("embeddings_layer_norm/gamma", "bert.embeddings.LayerNorm.weight", copy),
    ("embeddings_layer_norm/beta", "bert.embeddings.LayerNorm.bias", copy),
    # BertForMaskedLM has no pooler (and the MLM loss never trains keras-hub's).
    ("pooled_dense/kernel", None, None),
    ("pooled_dense/bias", None, None),
    ("mlm_head/intermediate_dense/kernel", "cls.predictions.transform.dense.weight", transpose),
    ("mlm_head/intermediate_dense/bias", "cls.predictions.transform.dense.bias", copy),
    ("mlm_head/intermediate_layer_norm/gamma", "cls.predictions.transform.LayerNorm.weight", copy),
    ("mlm_head/intermediate_layer_norm/beta", "cls.predictions.transform.LayerNorm.bias", copy),
    ("mlm_head/output_bias", "cls.predictions.bias", copy),
)


# keras-hub's BertBackbone hard-codes the tanh GELU in its encoder layers.
ACTIVATION = "gelu_approximate"


def hf_config(backbone_config: dict, ids: dict):
    """keras-hub BERT layers use the tanh GELU (or the exact one a checkpoint asked for:
    `activation`); its MLM head uses the exact GELU and epsilon 1e-5, which one transformers
    config cannot express: the head is approximate (tested)."""
    from transformers import BertConfig

    return BertConfig(
        **hf_common_config(backbone_config, ids),
        hidden_act=activation.hf_name(backbone_config, ACTIVATION),
        layer_norm_eps=1e-12,
        type_vocab_size=backbone_config.get("num_segments", 2),
        max_position_embeddings=backbone_config["max_sequence_length"],
        architectures=["BertForMaskedLM"],
    )


def backbone_config(hf: dict) -> dict:
    """The inverse of `hf_config`."""
    return dict(
        common_backbone_config(hf),
        max_sequence_length=hf["max_position_embeddings"],
        num_segments=hf.get("type_vocab_size", 2),
        **activation.of_hf(hf, ACTIVATION),
    )


FAMILY = Family(
    name="bert",
    backbone_class="BertBackbone",
    task_class="BertMaskedLM",
    registered_name="keras_hub>BertBackbone",
    takes_segment_ids=True,
    hf_config=hf_config,
    weight_rows=ROWS,
    hf_prefix="bert",
    backbone_config_of=backbone_config,
    classifier_class="BertTextClassifier",
    layer_rows=ENCODER_LAYER,
    hf_masked_lm_class="BertForMaskedLM",
    tied={
        "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    },
    not_mlm=("bert.pooler.", "cls.seq_relationship."),
    hub_checkpoint="google-bert/bert-base-uncased",
    hub_vocabulary=30522,
    preset_tokenizer=("keras_hub>BertTokenizer", "wordpiece"),
    pair_separators=1,
    positions="absolute",
    hf_positions_after_pad=False,
    legacy_configs={
        "bert-base-uncased": "base",
        "bert-base-cased": "base",
        "bert-large-uncased": "large",
    },
    set_by_trainer=SET_BY_TRAINER,
    hf_computed=HF_COMPUTED,
    activation=ACTIVATION,
)
