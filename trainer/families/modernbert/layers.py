"""ModernBERT's layers: the packed-document ids, attention with rotary positions, the GeGLU
feed-forward and the pre-norm encoder layer (transformers' ModernBertEncoderLayer).

Example:
    >>> layer = ModernBertEncoderLayer(
    ...     hidden_dim=64, intermediate_dim=96, num_heads=2, window=128, rope_theta=10_000.0,
    ...     first=False, out_stddev=0.02 / 4)
    >>> x = layer(hidden, segment_ids, positions)   # hidden [batch, length, 64]
"""

from __future__ import annotations

import keras
from keras import ops
from keras_hub.layers import RotaryEmbedding

from trainer.families.modernbert import attention, documents

PACKAGE = "mlm_pretrain"  # the registered names' prefix, "mlm_pretrain>ModernBert..."
NORM_EPSILON = 1e-5


def initializer(stddev: float):
    """Truncated normal at ±2 standard deviations (transformers' `initializer_cutoff_factor`
    2): Keras' TruncatedNormal redraws what falls outside two."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


def layer_norm(name: str, dtype):
    """LayerNorm without a bias (ModernBERT's `norm_bias` False)."""
    return keras.layers.LayerNormalization(
        epsilon=NORM_EPSILON, center=False, dtype=dtype, name=name
    )


@keras.saving.register_keras_serializable(package=PACKAGE)
class DocumentIds(keras.layers.Layer):
    """(token_ids, padding_mask) -> (segment_ids, positions): documents.document_ids as a
    layer of the functional backbone."""

    def __init__(self, separator_id=None, **kwargs):
        super().__init__(**kwargs)
        self.separator_id = separator_id

    def call(self, token_ids, padding_mask):
        return documents.document_ids(token_ids, padding_mask, self.separator_id)

    def compute_output_spec(self, token_ids, padding_mask):
        spec = keras.KerasTensor(token_ids.shape, "int32")
        return spec, keras.KerasTensor(token_ids.shape, "int32")

    def get_config(self):
        return {**super().get_config(), "separator_id": self.separator_id}


@keras.saving.register_keras_serializable(package=PACKAGE)
class ModernBertAttention(keras.layers.Layer):
    """Fused Wqkv (no bias) -> rotary q and k in float32 -> masked attention -> Wo.

    `window`: the whole local window (None in a global layer); `dropout`: transformers'
    `attention_dropout`, on the probabilities and on Wo's output."""

    def __init__(
        self,
        hidden_dim,
        num_heads,
        window,
        rope_theta,
        out_stddev,
        dropout=0.0,
        attention_path="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_dim, self.num_heads, self.window = hidden_dim, num_heads, window
        self.rope_theta, self.out_stddev, self.dropout = rope_theta, out_stddev, dropout
        self.attention_path = attention_path
        self.path_used = None  # the path the last trace took (attention.choose_path)
        self.head_dim = hidden_dim // num_heads
        self.wqkv = keras.layers.Dense(
            3 * hidden_dim,
            use_bias=False,
            kernel_initializer=initializer(0.02),
            dtype=self.dtype_policy,
            name="wqkv",
        )
        self.wo = keras.layers.Dense(
            hidden_dim,
            use_bias=False,
            kernel_initializer=initializer(out_stddev),
            dtype=self.dtype_policy,
            name="wo",
        )
        # rotate-half RoPE computed and applied in float32, as transformers does
        self.rotary = RotaryEmbedding(max_wavelength=rope_theta, dtype="float32", name="rotary")
        self.probs_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.out_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, input_shape):
        self.wqkv.build(input_shape)
        self.wo.build(input_shape)
        self.built = True

    def call(self, x, segment_ids, positions, training=None):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        qkv = ops.reshape(self.wqkv(x), (batch, length, 3, self.num_heads, self.head_dim))
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        q, k = (
            ops.cast(self.rotary(ops.cast(t, "float32"), positions=positions), v.dtype)
            for t in (q, k)
        )
        self.path_used = attention.choose_path(
            self.attention_path,
            x.shape[1],
            self.compute_dtype,
            dropout_active=bool(training) and self.dropout > 0,
        )
        out = attention.attend(
            self.path_used,
            q,
            k,
            v,
            segment_ids,
            self.window,
            self.probs_dropout if self.dropout > 0 else None,
            training,
        )
        out = ops.reshape(out, (batch, length, self.hidden_dim))
        return self.out_dropout(self.wo(out), training=training)

    def get_config(self):
        return {
            **super().get_config(),
            "hidden_dim": self.hidden_dim,
            "num_heads": self.num_heads,
            "window": self.window,
            "rope_theta": self.rope_theta,
            "out_stddev": self.out_stddev,
            "dropout": self.dropout,
            "attention_path": self.attention_path,
        }


@keras.saving.register_keras_serializable(package=PACKAGE)
class ModernBertEncoderLayer(keras.layers.Layer):
    """x + attn(attn_norm(x)), then x + Wo(gelu(input) * gate) with [input, gate] = Wi(mlp_norm(x)).

    The first layer has no attn_norm: the embeddings' norm comes right before it
    (transformers' `nn.Identity` in layer 0)."""

    def __init__(
        self,
        hidden_dim,
        intermediate_dim,
        num_heads,
        window,
        rope_theta,
        first,
        out_stddev,
        dropout=0.0,
        attention_dropout=0.0,
        attention_path="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.config_values = dict(
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            num_heads=num_heads,
            window=window,
            rope_theta=rope_theta,
            first=first,
            out_stddev=out_stddev,
            dropout=dropout,
            attention_dropout=attention_dropout,
            attention_path=attention_path,
        )
        self.intermediate_dim = intermediate_dim
        dtype = self.dtype_policy
        self.attn_norm = None if first else layer_norm("attn_norm", dtype)
        self.attn = ModernBertAttention(
            hidden_dim,
            num_heads,
            window,
            rope_theta,
            out_stddev,
            attention_dropout,
            attention_path,
            dtype=dtype,
            name="attn",
        )
        self.mlp_norm = layer_norm("mlp_norm", dtype)
        self.wi = keras.layers.Dense(
            2 * intermediate_dim,
            use_bias=False,
            kernel_initializer=initializer(0.02),
            dtype=dtype,
            name="mlp_wi",
        )
        self.wo = keras.layers.Dense(
            hidden_dim,
            use_bias=False,
            kernel_initializer=initializer(out_stddev),
            dtype=dtype,
            name="mlp_wo",
        )
        self.mlp_dropout = keras.layers.Dropout(dropout, dtype=dtype)

    def build(self, input_shape):
        for norm in (self.attn_norm, self.mlp_norm):
            if norm is not None:
                norm.build(input_shape)
        self.attn.build(input_shape)
        self.wi.build(input_shape)
        self.wo.build((*input_shape[:-1], self.intermediate_dim))
        self.built = True

    def call(self, x, segment_ids, positions, training=None):
        h = x if self.attn_norm is None else self.attn_norm(x)
        x = x + self.attn(h, segment_ids, positions, training=training)
        gelu_input, gate = ops.split(self.wi(self.mlp_norm(x)), 2, axis=-1)
        h = keras.activations.gelu(gelu_input, approximate=False) * gate
        return x + self.wo(self.mlp_dropout(h, training=training))

    def compute_output_spec(self, x, segment_ids, positions, training=None):
        # Not traced on placeholder shapes: a fused attention path checks the real length.
        return keras.KerasTensor(x.shape, self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), **self.config_values}
