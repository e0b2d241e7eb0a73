"""What reads a sequence of final hidden states as one vector: the first token (`cls`) or the
mean of the non-padding tokens (`mean`). Fine-tuning's classifier head reads it
(trainer/finetuning/classifier.py), and so do the release's sentence embeddings
(trainer/release/embeddings.py): one implementation for both.

keras-hub's RoBERTa classifier takes `backbone(inputs)[:, start_token_index]` and runs its
own head on it (dropout, dense + tanh, dropout, logits); BERT's takes the backbone's
`pooled_output` (its pooler, dense + tanh on `[CLS]`) and adds dropout and logits. `mean`
builds a model with the same layers, fed by the mean over the tokens that `padding_mask`
marks instead (ModernBERT's `classifier_pooling="mean"`): RoBERTa's head as it is, BERT's
pooler applied to the mean. The mean is a masked sum over a fixed-length axis, so it
compiles with XLA on both backends like the rest of the step.

Example:
    >>> model = mean_pooled(RobertaTextClassifier(backbone, num_classes=3, preprocessor=None))
    >>> vector = pool(token_states(backbone(inputs)), inputs["padding_mask"], "mean")
"""

from __future__ import annotations

import keras
from keras import ops

CHOICES = ("cls", "mean")


class MeanPool(keras.layers.Layer):
    """(batch, length, hidden), (batch, length) mask -> (batch, hidden): the mean of the
    positions the mask keeps (a row with none kept gives zeros, not a division by 0)."""

    def call(self, sequence, padding_mask):
        mask = ops.expand_dims(ops.cast(padding_mask, sequence.dtype), -1)
        total = ops.sum(sequence * mask, axis=1)
        return total / ops.maximum(ops.sum(mask, axis=1), 1.0)


def token_states(outputs):
    """The backbone's final hidden states, (batch, length, hidden): BERT's backbone returns a
    dict beside its pooler's output, the others the tensor itself."""
    if isinstance(outputs, dict):  # BERT: {"sequence_output", "pooled_output"}
        return outputs["sequence_output"]
    return outputs


def pool(sequence, padding_mask, how: str, dtype=None):
    """(batch, hidden) from the final hidden states, read as `how` (one of CHOICES); the
    start token sits at position 0 in every family's packing."""
    if how == "mean":
        return MeanPool(dtype=dtype, name="mean_pool")(sequence, padding_mask)
    if how == "cls":
        return sequence[:, 0, :]
    raise ValueError(f"pooling {how!r} is not one of {CHOICES}")


class MeanPooledClassifier(keras.Model):
    """A keras-hub TextClassifier's backbone and head, the head reading the mean of the
    non-padding tokens. `backbone` is kept as an attribute, as keras-hub's tasks keep it."""

    def __init__(self, backbone, head: list, **kwargs):
        inputs = backbone.input
        outputs = token_states(backbone(inputs))
        x = pool(outputs, inputs["padding_mask"], "mean", dtype=backbone.dtype_policy)
        for layer in head:
            x = layer(x)
        super().__init__(inputs=inputs, outputs=x, **kwargs)
        self.backbone = backbone
        self.head_names = tuple(layer.name for layer in head)  # names: not tracked twice


def head_layers(classifier) -> list:
    """The layers keras-hub's classifier applies after taking the first token, in order."""
    if hasattr(classifier, "pooled_dense"):  # RoBERTa's head: its own dense + tanh
        return [
            classifier.pooled_dropout,
            classifier.pooled_dense,
            classifier.output_dropout,
            classifier.output_dense,
        ]
    # BERT: the backbone's pooler (dense + tanh) is what its classifier reads.
    return [classifier.backbone.pooled_dense, classifier.output_dropout, classifier.output_dense]


def head_layers_of(classifier) -> list:
    """The head of a classifier as fine-tuning builds it: keras-hub's (`head_layers`), or a
    `MeanPooledClassifier`'s own."""
    if isinstance(classifier, MeanPooledClassifier):
        return [classifier.get_layer(name) for name in classifier.head_names]
    return head_layers(classifier)


def mean_pooled(classifier) -> MeanPooledClassifier:
    return MeanPooledClassifier(classifier.backbone, head_layers(classifier))


def pool_examples(states, example_ids, starts, how: str):
    """(examples, hidden) from packed rows (trainer/finetuning/packed_rows.py): `states`
    [rows, length, hidden], `example_ids` [rows, length] each token's example (-1: padding),
    `starts` [examples] the flat index (row * length + column) of each example's first token.
    `mean` averages an example's tokens (what `MeanPool` gives the text padded alone), `cls`
    takes its first. A one-hot matmul, not a scatter: fixed shapes, XLA on both backends."""
    hidden = ops.shape(states)[-1]
    flat = ops.reshape(states, (-1, hidden))
    if how == "cls":
        return ops.take(flat, starts, axis=0)
    if how != "mean":
        raise ValueError(f"pooling {how!r} is not one of {CHOICES}")
    count = ops.shape(starts)[0]
    ids = ops.reshape(example_ids, (-1,))
    members = ops.cast(
        ops.equal(ids[None, :], ops.arange(count, dtype=ids.dtype)[:, None]), flat.dtype
    )
    total = ops.matmul(members, flat)
    return total / ops.maximum(ops.sum(members, axis=1, keepdims=True), 1.0)


def l2_normalised(pooled):
    """torch's F.normalize, as sentence-transformers' Normalize: x / max(|x|, 1e-12)."""
    norm = ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True))
    return pooled / ops.maximum(norm, 1e-12)
