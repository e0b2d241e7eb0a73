"""`ModernBertTextClassifier`: transformers' ModernBertForSequenceClassification head on our
backbone, in the shape of keras-hub's RoBERTa classifier (the attributes the fine-tuning code
reads: `pooled_dropout`, `pooled_dense`, `output_dropout`, `output_dense`).

The head reads the first token (`classifier_pooling="cls"`; `trainer/models/pooling.py`
rebuilds it on the mean of the tokens for `"mean"`), then dense -> GELU -> LayerNorm without
bias (transformers' ModernBertPredictionHead, no bias as `classifier_bias=False`), dropout and
the logits.

Example:
    >>> classifier = ModernBertTextClassifier(backbone, num_classes=3, dropout=0.1)
    >>> classifier({"token_ids": ids, "padding_mask": ids != 0})   # [batch, 3]
"""

from __future__ import annotations

import keras
import keras_hub

from trainer.families.modernbert.layers import PACKAGE, initializer, layer_norm


@keras.saving.register_keras_serializable(package=PACKAGE)
class ModernBertPredictionHead(keras.layers.Layer):
    """dense (no bias) -> exact GELU -> LayerNorm (no bias)."""

    def __init__(self, hidden_dim, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.dense = keras.layers.Dense(
            hidden_dim,
            use_bias=False,
            kernel_initializer=initializer(0.02),
            dtype=self.dtype_policy,
            name="dense",
        )
        self.norm = layer_norm("norm", self.dtype_policy)

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.norm.build((*input_shape[:-1], self.hidden_dim))
        self.built = True

    def call(self, x):
        return self.norm(keras.activations.gelu(self.dense(x), approximate=False))

    def get_config(self):
        return {**super().get_config(), "hidden_dim": self.hidden_dim}


@keras.saving.register_keras_serializable(package=PACKAGE)
class ModernBertTextClassifier(keras_hub.models.TextClassifier):
    """ModernBERT sequence classifier (`num_classes` logits; 1 for a regression)."""

    def __init__(self, backbone, num_classes, preprocessor=None, dropout=0.0, **kwargs):
        self.backbone = backbone
        self.preprocessor = preprocessor
        policy = backbone.dtype_policy
        self.pooled_dropout = keras.layers.Dropout(0.0, dtype=policy, name="pooled_dropout")
        self.pooled_dense = ModernBertPredictionHead(
            backbone.hidden_dim, dtype=policy, name="pooled_dense"
        )
        self.output_dropout = keras.layers.Dropout(dropout, dtype=policy, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=initializer(0.02), dtype=policy, name="logits"
        )
        inputs = backbone.input
        x = backbone(inputs)[:, 0, :]
        x = self.pooled_dense(self.pooled_dropout(x))
        outputs = self.output_dense(self.output_dropout(x))
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.num_classes = num_classes
        self.dropout = dropout

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "dropout": self.dropout})
        return config
