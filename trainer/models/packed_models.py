"""Fine-tuning models that read packed rows (trainer/finetuning/packed_rows.py: several short
examples a row, read apart by the family's `packed_states`, ModernBERT's document masks): the
same backbone and weights as their padded counterparts, which the exports write.

- `PackedEmbedding`: one unit vector per example, in the examples' order (what
  `release.embeddings.embedding_model` gives the texts padded one a row).
- `PackedTagger`: logits per piece (what `release.token_classification_export.tagger` gives).
- `PackedClassifier`: a sequence classifier's logits (a reranker's one), given at every token
  of each example: its example's pooled state through the classifier's head. Keras' `fit`
  slices inputs, targets and weights by the same rows, so the target sits on the example's
  first token with weight 1 (0 elsewhere), and a prediction is read there.

Subclassed models: their inputs (`example_ids`, `positions`, and the embedding's
`example_starts`, one per example, not per row) are not a functional backbone's.

Example:
    >>> model = PackedEmbedding(backbone, family.packed_states, "mean")
    >>> vectors = model(packed_rows.Packed(pad_id, 128).features(rows))
"""

from __future__ import annotations

import keras

from trainer.models import pooling


def _states(model, inputs, training):
    return model.packed_states(
        model.backbone,
        inputs["token_ids"],
        inputs["example_ids"],
        inputs["positions"],
        training=training,
    )


class PackedEmbedding(keras.Model):
    """`embedding_model`'s vectors from packed rows, pooled per example (`how`)."""

    def __init__(self, backbone, packed_states, how: str, **kwargs):
        super().__init__(name=f"packed_{how}_embedding", **kwargs)
        self.backbone, self.packed_states, self.how = backbone, packed_states, how
        self.built = True  # the backbone is; pooling has no weights

    def call(self, inputs, training=None):
        states = _states(self, inputs, training)
        pooled = pooling.pool_examples(
            states, inputs["example_ids"], inputs["example_starts"], self.how
        )
        return pooling.l2_normalised(pooled)


class PackedTagger(keras.Model):
    """Logits per piece of packed rows: the backbone's packed states, then the head's layers
    (named as the export finds them). Build it by calling it once on a row
    (`token_classification_export.packed_tagger` does)."""

    def __init__(self, backbone, head: list, packed_states, **kwargs):
        super().__init__(name="packed_tagger", **kwargs)
        self.backbone, self.head, self.packed_states = backbone, head, packed_states

    def call(self, inputs, training=None):
        states = _states(self, inputs, training)
        for layer in self.head:
            states = layer(states, training=training)
        return states


class PackedClassifier(keras.Model):
    """`classifier` (the family's, `finetuning.classifier.PretrainedBackbone.classifier`: a
    head on the first token or the mean, `how`) reading packed rows: [rows, length, outputs].
    Each token's vector is its example's first state or the mean of its states, taken with a
    [rows, length, length] same-example matrix (no per-batch example count: `fit` slices
    rows), then the head's layers."""

    def __init__(self, classifier, packed_states, how: str, **kwargs):
        super().__init__(name=f"packed_{how}_classifier", **kwargs)
        self.classifier, self.packed_states, self.how = classifier, packed_states, how
        self.built = True  # the classifier is

    @property
    def backbone(self):  # the classifier's (a property: its layers are tracked once)
        return self.classifier.backbone

    def call(self, inputs, training=None):
        states = _states(self, inputs, training)
        ids, positions = inputs["example_ids"], inputs["positions"]
        pick = keras.ops.equal(ids[:, :, None], ids[:, None, :])
        if self.how == "cls":
            pick = keras.ops.logical_and(pick, keras.ops.equal(positions, 0)[:, None, :])
        weights = keras.ops.cast(pick, "float32")
        weights = weights / keras.ops.maximum(keras.ops.sum(weights, -1, keepdims=True), 1.0)
        x = keras.ops.einsum("rij,rjd->rid", weights, keras.ops.cast(states, "float32"))
        for layer in pooling.head_layers_of(self.classifier):
            x = layer(x, training=training)
        return x
