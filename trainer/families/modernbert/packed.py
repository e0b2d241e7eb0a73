"""Several fine-tuning examples in one row of a ModernBERT backbone: the backbone's own layers,
fed the documents as the packer laid them out instead of finding them by the cls token.

Pretraining's packed rows split documents at every cls/bos token (documents.py). A packed
fine-tuning batch knows each token's example already (trainer/finetuning/packed_rows.py), so it
passes that as the segment ids: a literal `<s>` inside a text splits nothing, exactly as when
the text reads alone in its row. Each example's rotary positions start at 0 and its tokens
attend only to each other (a local layer's band counts row positions, and an example is
contiguous), so an example's final states equal those of the same text padded alone, to
float rounding (tests/trainer/families/test_modernbert_packed.py).

Example:
    >>> states = packed_states(backbone, token_ids, example_ids, positions)  # [rows, len, hidden]
"""

from __future__ import annotations


def packed_states(backbone, token_ids, example_ids, positions, training=None):
    """Final hidden states [rows, length, hidden] of `token_ids` [rows, length], where
    `example_ids` gives each token's example (-1: padding, which attends only to padding) and
    `positions` its position inside that example."""
    x = backbone.embeddings_norm(backbone.token_embedding(token_ids))
    x = backbone.get_layer("embeddings_dropout")(x, training=training)
    for layer in backbone.encoder_layers:
        x = layer(x, example_ids, positions, training=training)
    return backbone.final_norm(x)
