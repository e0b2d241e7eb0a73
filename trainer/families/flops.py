"""Model FLOPs of one token in one training step, from a family's record and a backbone config:
what a benchmark divides achieved throughput by (benchmarks/accel/, benchmarks/family_lengths.py).

Forward 2, backward 4 FLOPs per weight and token of each matrix product: 6 x `dense_weights`
+ 6 x hidden x vocabulary x the masking rate (the vocabulary projection an MLM needs: our step
computes it at the masked slots only) + 12 x hidden x the keys each layer's queries attend
(scores and values, forward 4 x hidden per key, backward twice that). Biases, norms and the
element-wise work are not counted. Packed documents are not subtracted: a document mask makes
a global layer's useful work smaller than length x length, but transformers' model attends
across documents, and a benchmark counts the same for both.

Example:
    >>> per_token(families.get("roberta"), backbone_config, 128, 0.15)   # base: ~5.6e8
"""

from __future__ import annotations


def dense_weights(family, backbone_config: dict) -> int:
    """Weights of the matrix products each token goes through: per layer q, k, v and o
    (4 x hidden²) and the feed-forward (2 x hidden x intermediate; gated, 3: the input
    projection is twice as wide), then the LM head's transform (hidden x hidden)."""
    h, i = backbone_config["hidden_dim"], backbone_config["intermediate_dim"]
    feed_forward = (3 if family.gated_feed_forward else 2) * h * i
    return backbone_config["num_layers"] * (4 * h * h + feed_forward) + h * h


def keys_per_query(length: int, window: int | None) -> float:
    """Keys a query attends to, averaged over a row's positions: all of them in a global
    layer (`window` None); in a local one those within ±window // 2 (fewer near the ends)."""
    if window is None or window // 2 >= length - 1:
        return float(length)
    half = window // 2
    total = sum(min(i, half) + min(length - 1 - i, half) + 1 for i in range(length))
    return total / length


def attended_keys(family, backbone_config: dict, length: int) -> float:
    """Keys per query summed over the layers (`Family.attention_windows`)."""
    return sum(keys_per_query(length, w) for w in family.attention_windows(backbone_config))


def per_token(family, backbone_config: dict, length: int, mask_rate: float) -> float:
    """Model FLOPs of one token in one training step (the module's formula)."""
    hidden = backbone_config["hidden_dim"]
    return (
        6 * dense_weights(family, backbone_config)
        + 6 * hidden * backbone_config["vocabulary_size"] * mask_rate
        + 12 * hidden * attended_keys(family, backbone_config, length)
    )
