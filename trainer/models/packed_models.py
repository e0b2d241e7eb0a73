"""Fine-tuning models that read packed rows (trainer/finetuning/packed_rows.py: several short
examples a row, read apart by the family's `packed_states`, ModernBERT's document masks): the
same backbone and weights as their padded counterparts, which the exports write.

- `PackedEmbedding`: one unit vector per example, in the examples' order (what
  `release.embeddings.embedding_model` gives the texts padded one a row).
- `PackedTagger`: logits per piece (what `release.token_classification_export.tagger` gives).

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
