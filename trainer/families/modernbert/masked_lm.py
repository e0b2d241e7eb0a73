"""`ModernBertMaskedLM`: the backbone with ModernBERT's LM head, computed only at fixed-size
`mask_positions` (the interface of keras-hub's RobertaMaskedLM that the trainer feeds:
token_ids, padding_mask, mask_positions -> logits [batch, positions, padded vocabulary]).

The head is transformers' ModernBertPredictionHead and decoder: dense (no bias) -> gelu ->
LayerNorm (no bias) -> the tied token embedding in reverse -> + a bias.

Example:
    >>> masked_lm = ModernBertMaskedLM(backbone)
    >>> logits = masked_lm({"token_ids": ids, "padding_mask": ids != 0,
    ...                     "mask_positions": np.array([[1, 5]] * len(ids))})
"""

from __future__ import annotations

import keras
import keras_hub
from keras import ops

from trainer.families.modernbert.backbone import ModernBertBackbone
from trainer.families.modernbert.layers import PACKAGE, initializer, layer_norm


@keras.saving.register_keras_serializable(package=PACKAGE)
class ModernBertMaskedLMHead(keras.layers.Layer):
    """Gathers `mask_positions` of the encoder output, then dense -> gelu -> norm -> tied
    decoder + bias. Built from its backbone (a task's config holds only the backbone)."""

    def __init__(self, token_embedding, hidden_dim, out_stddev, **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.dense = keras.layers.Dense(
            hidden_dim,
            use_bias=False,
            kernel_initializer=initializer(out_stddev),
            dtype=self.dtype_policy,
            name="dense",
        )
        self.norm = layer_norm("norm", self.dtype_policy)

    def build(self, inputs_shape, mask_positions_shape=None):
        self.dense.build(inputs_shape)
        self.norm.build(inputs_shape)
        self.bias = self.add_weight(
            name="decoder_bias",
            shape=(self.token_embedding.input_dim,),
            initializer="zeros",
            dtype=self.variable_dtype,
        )
        self.built = True

    def call(self, inputs, mask_positions):
        x = ops.take_along_axis(inputs, ops.expand_dims(mask_positions, -1), axis=1)
        x = self.norm(keras.activations.gelu(self.dense(x), approximate=False))
        logits = self.token_embedding(x, reverse=True)
        return ops.cast(logits, self.compute_dtype) + ops.cast(self.bias, self.compute_dtype)

    def compute_output_shape(self, inputs_shape, mask_positions_shape):
        return (*mask_positions_shape, self.token_embedding.input_dim)


@keras.saving.register_keras_serializable(package=PACKAGE)
class ModernBertMaskedLM(keras_hub.models.MaskedLM):
    """ModernBERT for masked language modelling (no preprocessor: the trainer masks inside
    its compiled step, trainer/data/masking.py).

    Args:
        backbone: a `ModernBertBackbone`.
        preprocessor: None (kept for keras-hub's Task interface).
    """

    backbone_cls = ModernBertBackbone
    preprocessor_cls = None

    def __init__(self, backbone, preprocessor=None, **kwargs):
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.masked_lm_head = ModernBertMaskedLMHead(
            backbone.token_embedding,
            backbone.hidden_dim,
            out_stddev=0.02 / (2.0 * backbone.num_layers) ** 0.5,
            dtype=backbone.dtype_policy,
            name="mlm_head",
        )
        inputs = {
            **backbone.input,
            "mask_positions": keras.Input(shape=(None,), dtype="int32", name="mask_positions"),
        }
        outputs = self.masked_lm_head(backbone(backbone.input), inputs["mask_positions"])
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
