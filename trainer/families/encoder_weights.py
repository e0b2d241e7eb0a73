"""keras-hub <-> transformers weight transforms and the encoder-layer rows that BERT-style
families share (keras-hub cannot export RoBERTa/BERT to transformers, so this table is ours).

Each row is (keras-hub variable path, transformers parameter name, transform); `{i}` is the
layer index and `{m}` the transformers base-model prefix. The export reads a row forwards
(`transform`); `--init_from` reads the same row backwards (`transform.inverse`, set below by
`inverse_of`), so the two directions cannot drift apart.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Context:
    """What some transforms need besides the weight itself."""

    pad_id: int
    hidden_dim: int
    # Reading backwards: the whole transformers state dict (RoBERTa folds one tensor into
    # another) and the keras-hub variable's shape.
    hf: dict | None = None
    shape: tuple = ()


def inverse_of(forward):
    """Registers the decorated function as `forward.inverse` (transformers -> keras-hub)."""

    def register(backward):
        forward.inverse = backward
        return backward

    return register


# Transforms from a keras-hub variable to a torch parameter.
def copy(w, ctx):
    return w


def transpose(w, ctx):  # Keras Dense kernel (in, out) -> torch Linear weight (out, in).
    return w.T


def heads_in_kernel(w, ctx):  # EinsumDense (hidden, heads, head_dim) -> (heads*head_dim, hidden)
    return w.reshape(w.shape[0], -1).T


def heads_bias(w, ctx):  # (heads, head_dim) -> (heads*head_dim,)
    return w.reshape(-1)


def heads_out_kernel(w, ctx):  # EinsumDense (heads, head_dim, hidden) -> (hidden, heads*head_dim)
    return w.reshape(-1, w.shape[-1]).T


@inverse_of(copy)
def _copy_back(w, ctx):
    return w


@inverse_of(transpose)
def _transpose_back(w, ctx):
    return w.T


@inverse_of(heads_in_kernel)
@inverse_of(heads_out_kernel)
def _heads_kernel_back(w, ctx):  # both are a transpose of a reshape: undo in reverse order
    return w.T.reshape(ctx.shape)


@inverse_of(heads_bias)
def _heads_bias_back(w, ctx):
    return w.reshape(ctx.shape)


# One row per weight: (keras-hub variable path, transformers parameter name, transform).
# `{i}` is the layer index, `{m}` the HF base model prefix. A None keras path means the HF
# weight has no keras-hub counterpart; a None HF name means the variable is not exported.
# The LM decoder weight and bias are tied in HF (to word embeddings and the head bias).
ENCODER_LAYER = (
    (
        "transformer_layer_{i}/self_attention_layer/query/kernel",
        "{m}.encoder.layer.{i}.attention.self.query.weight",
        heads_in_kernel,
    ),
    (
        "transformer_layer_{i}/self_attention_layer/query/bias",
        "{m}.encoder.layer.{i}.attention.self.query.bias",
        heads_bias,
    ),
    (
        "transformer_layer_{i}/self_attention_layer/key/kernel",
        "{m}.encoder.layer.{i}.attention.self.key.weight",
        heads_in_kernel,
    ),
    (
        "transformer_layer_{i}/self_attention_layer/key/bias",
        "{m}.encoder.layer.{i}.attention.self.key.bias",
        heads_bias,
    ),
    (
        "transformer_layer_{i}/self_attention_layer/value/kernel",
        "{m}.encoder.layer.{i}.attention.self.value.weight",
        heads_in_kernel,
    ),
    (
        "transformer_layer_{i}/self_attention_layer/value/bias",
        "{m}.encoder.layer.{i}.attention.self.value.bias",
        heads_bias,
    ),
    (
        "transformer_layer_{i}/self_attention_layer/attention_output/kernel",
        "{m}.encoder.layer.{i}.attention.output.dense.weight",
        heads_out_kernel,
    ),
    (
        "transformer_layer_{i}/self_attention_layer/attention_output/bias",
        "{m}.encoder.layer.{i}.attention.output.dense.bias",
        copy,
    ),
    (
        "transformer_layer_{i}/self_attention_layer_norm/gamma",
        "{m}.encoder.layer.{i}.attention.output.LayerNorm.weight",
        copy,
    ),
    (
        "transformer_layer_{i}/self_attention_layer_norm/beta",
        "{m}.encoder.layer.{i}.attention.output.LayerNorm.bias",
        copy,
    ),
    (
        "transformer_layer_{i}/feedforward_intermediate_dense/kernel",
        "{m}.encoder.layer.{i}.intermediate.dense.weight",
        transpose,
    ),
    (
        "transformer_layer_{i}/feedforward_intermediate_dense/bias",
        "{m}.encoder.layer.{i}.intermediate.dense.bias",
        copy,
    ),
    (
        "transformer_layer_{i}/feedforward_output_dense/kernel",
        "{m}.encoder.layer.{i}.output.dense.weight",
        transpose,
    ),
    (
        "transformer_layer_{i}/feedforward_output_dense/bias",
        "{m}.encoder.layer.{i}.output.dense.bias",
        copy,
    ),
    (
        "transformer_layer_{i}/feedforward_layer_norm/gamma",
        "{m}.encoder.layer.{i}.output.LayerNorm.weight",
        copy,
    ),
    (
        "transformer_layer_{i}/feedforward_layer_norm/beta",
        "{m}.encoder.layer.{i}.output.LayerNorm.bias",
        copy,
    ),
)


# The transformers config fields of RoBERTa and BERT that change what the model computes
# (`Family.hf_computed`): a config --init_from reads must say of each what `hf_config` would
# write for the backbone it converts to, else the logits would differ.
HF_COMPUTED = (
    "hidden_act",
    "layer_norm_eps",
    "type_vocab_size",
    "max_position_embeddings",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
    "attention_probs_dropout_prob",
    "tie_word_embeddings",
    "is_decoder",
    "add_cross_attention",
    "position_embedding_type",
)


def hf_common_config(backbone_config: dict, special_token_ids: dict) -> dict:
    """transformers config fields that RoBERTa and BERT share."""
    return dict(
        vocab_size=backbone_config["vocabulary_size"],
        hidden_size=backbone_config["hidden_dim"],
        num_hidden_layers=backbone_config["num_layers"],
        num_attention_heads=backbone_config["num_heads"],
        intermediate_size=backbone_config["intermediate_dim"],
        hidden_dropout_prob=backbone_config.get("dropout", 0.1),
        attention_probs_dropout_prob=backbone_config.get("dropout", 0.1),
        pad_token_id=special_token_ids["pad_token"],
        bos_token_id=special_token_ids["cls_token"],
        eos_token_id=special_token_ids["sep_token"],
        tie_word_embeddings=True,
    )


def common_backbone_config(hf: dict) -> dict:
    """The inverse of `hf_common_config`: keras-hub backbone arguments from a transformers
    config.json (the family adds its own; `trainer.models.init_from` checks the round trip)."""
    return dict(
        vocabulary_size=hf["vocab_size"],
        hidden_dim=hf["hidden_size"],
        num_layers=hf["num_hidden_layers"],
        num_heads=hf["num_attention_heads"],
        intermediate_dim=hf["intermediate_size"],
        dropout=hf.get("hidden_dropout_prob", 0.1),
    )
