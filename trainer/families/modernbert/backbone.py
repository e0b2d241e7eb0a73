"""`ModernBertBackbone`: transformers' ModernBertModel as a keras-hub Backbone.

Token embedding (tied with the LM head; rows padded to a multiple of 64) -> LayerNorm (no
bias) -> layers of pre-norm attention with rotary positions and a GeGLU feed-forward, global
every `global_attention_every`-th layer from layer 0 and local (a `local_window`-token band)
in between -> final LayerNorm. No position or token-type embeddings.

Packed rows: with `separator_id` (the tokenizer's cls/bos id), each document in a row attends
only to itself and its rotary positions restart at 0 (documents.py); None treats a row as one
document. Padding never reaches a real token.

Example:
    >>> backbone = ModernBertBackbone(vocabulary_size=1000, num_layers=3, num_heads=2,
    ...                               hidden_dim=64, intermediate_dim=96, separator_id=2)
    >>> backbone({"token_ids": ids, "padding_mask": ids != 0})   # [batch, length, 64]
    >>> backbone.save_to_preset("preset_dir")   # reloads with Backbone.from_preset
"""

from __future__ import annotations

import math

import keras
import keras_hub
from keras_hub.layers import ReversibleEmbedding

from trainer.families.modernbert import attention
from trainer.families.modernbert.layers import (
    PACKAGE,
    DocumentIds,
    ModernBertEncoderLayer,
    initializer,
    layer_norm,
)

GLOBAL, LOCAL = "full_attention", "sliding_attention"  # transformers' layer_types names


def padded(vocabulary_size: int, multiple: int) -> int:
    return -(-vocabulary_size // multiple) * multiple


def layer_types(num_layers: int, global_attention_every: int) -> list[str]:
    """transformers' `layer_types`: global at layers 0, n, 2n, ..., local elsewhere."""
    return [LOCAL if i % global_attention_every else GLOBAL for i in range(num_layers)]


def _heads_problem(hidden_dim, num_heads) -> str | None:
    if hidden_dim % num_heads or (hidden_dim // num_heads) % 2:
        return (
            f"hidden_dim {hidden_dim} must split into {num_heads} heads of an even size "
            "(rotary positions rotate pairs of features)"
        )
    return None


def config_problem(config: dict) -> str | None:
    """What bounds on single arguments cannot say (`Family.config_rule`): one sentence about
    arguments of a training run that do not fit together, or None. `config` holds the
    arguments given (the constructor's defaults stand for the others)."""
    if problem := _heads_problem(config.get("hidden_dim", 0), config.get("num_heads", 1)):
        return problem
    # A model may be built with a fused path and dropout (it predicts without dropout), but
    # a run that trains would stop at its first step (attention.choose_path).
    path, dropout = config.get("attention_path", "auto"), config.get("attention_dropout", 0)
    if path in ("cudnn", "splash") and dropout:
        return (
            f"attention_path {path!r} has no attention dropout: attention_dropout must be 0 "
            f"with it (got {dropout}), or attention_path 'auto'"
        )
    return None


def _check(hidden_dim: int, num_heads: int, attention_path: str) -> None:
    if problem := _heads_problem(hidden_dim, num_heads):
        raise ValueError(problem)
    if attention_path not in attention.PATHS:
        raise ValueError(f"attention_path {attention_path!r} is not one of {attention.PATHS}")


def _encoder_layers(args: dict) -> list:
    """One encoder layer per layer type: a global one reads the whole row with the global
    theta, a local one the band with the local theta."""
    kinds = layer_types(args["num_layers"], args["global_attention_every"])
    thetas = {GLOBAL: args["global_rope_theta"], LOCAL: args["local_rope_theta"]}
    return [
        ModernBertEncoderLayer(
            args["hidden_dim"],
            args["intermediate_dim"],
            args["num_heads"],
            window=None if kind == GLOBAL else args["local_window"],
            rope_theta=thetas[kind],
            first=i == 0,
            # output projections start smaller, as transformers' _init_weights does
            out_stddev=0.02 / math.sqrt(2.0 * args["num_layers"]),
            dropout=args["dropout"],
            attention_dropout=args["attention_dropout"],
            attention_path=args["attention_path"],
            dtype=args["dtype"],
            name=f"layer_{i}",
        )
        for i, kind in enumerate(kinds)
    ]


@keras.saving.register_keras_serializable(package=PACKAGE)
class ModernBertBackbone(keras_hub.models.Backbone):
    """ModernBERT encoder.

    Args:
        vocabulary_size: the tokenizer's size; the embedding has
            `padded(vocabulary_size, vocabulary_multiple)` rows.
        num_layers, num_heads, hidden_dim, intermediate_dim: the shape
            (`intermediate_dim` is GeGLU's: its input projection is twice as wide).
        dropout: after the embeddings' norm and inside the feed-forward
            (transformers' `embedding_dropout` and `mlp_dropout`).
        attention_dropout: on the attention probabilities and the attention output
            (transformers' `attention_dropout`); fused attention paths need 0.
        max_sequence_length: recorded for the transformers config
            (`max_position_embeddings`); rotary positions set no limit here.
        global_attention_every: a global layer every this many, from layer 0.
        local_window: the whole window of a local layer (±local_window // 2 tokens).
        global_rope_theta, local_rope_theta: rotary base of global and local layers.
        separator_id: the id that opens each packed document, or None.
        vocabulary_multiple: the embedding rows are padded to a multiple of it.
        attention_path: "auto", "portable", "cudnn" or "splash" (attention.py).
        dtype: a Keras dtype policy.
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.0,
        attention_dropout=0.0,
        max_sequence_length=8192,
        global_attention_every=3,
        local_window=128,
        global_rope_theta=160_000.0,
        local_rope_theta=10_000.0,
        separator_id=None,
        vocabulary_multiple=64,
        attention_path="auto",
        dtype=None,
        **kwargs,
    ):
        args = {k: v for k, v in locals().items() if k not in ("self", "kwargs", "__class__")}
        _check(hidden_dim, num_heads, attention_path)
        token_embedding = ReversibleEmbedding(
            padded(vocabulary_size, vocabulary_multiple),
            hidden_dim,
            tie_weights=True,
            embeddings_initializer=initializer(0.02),
            dtype=dtype,
            name="token_embedding",
        )
        embeddings_norm = layer_norm("embeddings_norm", dtype)
        encoder_layers = _encoder_layers(args)
        final_norm = layer_norm("final_norm", dtype)

        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        segment_ids, positions = DocumentIds(separator_id, name="document_ids")(
            token_ids, padding_mask
        )
        x = embeddings_norm(token_embedding(token_ids))
        x = keras.layers.Dropout(dropout, dtype=dtype, name="embeddings_dropout")(x)
        for layer in encoder_layers:
            x = layer(x, segment_ids, positions)
        super().__init__(
            inputs={"token_ids": token_ids, "padding_mask": padding_mask},
            outputs=final_norm(x),
            dtype=dtype,
            **kwargs,
        )
        for name, value in args.items():  # the constructor's arguments, for get_config
            if name != "dtype":  # Keras' own (the dtype policy)
                setattr(self, name, value)
        self.token_embedding, self.encoder_layers = token_embedding, encoder_layers
        self.embeddings_norm, self.final_norm = embeddings_norm, final_norm

    @property
    def layer_types(self) -> list[str]:
        return layer_types(self.num_layers, self.global_attention_every)

    @property
    def attention_paths_used(self) -> list:
        """Per layer, the attention path its last trace took (None before a call)."""
        return [layer.attn.path_used for layer in self.encoder_layers]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "max_sequence_length": self.max_sequence_length,
                "global_attention_every": self.global_attention_every,
                "local_window": self.local_window,
                "global_rope_theta": self.global_rope_theta,
                "local_rope_theta": self.local_rope_theta,
                "separator_id": self.separator_id,
                "vocabulary_multiple": self.vocabulary_multiple,
                "attention_path": self.attention_path,
            }
        )
        return config
