"""Each family's shapes, masking rate and model FLOPs per token, the same for both frameworks.

The parent process imports nothing of the trainer (so that it never initialises a device):
the sizes and rates here are copies, checked equal to trainer/families/ by
tests/trainer/test_bench_accel.py.

Example:
    >>> flops_per_token("modernbert", "base", 1024, 50368)   # ~8.7e8
"""

from __future__ import annotations

FAMILIES = ("roberta", "modernbert")
SIZES = {
    # trainer/families/sizes.py
    "roberta": {
        "tiny": dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=512),
        "small": dict(num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=1024),
        "base": dict(num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072),
        "large": dict(num_layers=24, num_heads=16, hidden_dim=1024, intermediate_dim=4096),
    },
    # trainer/families/modernbert/sizes.py (intermediate_dim is GeGLU's: Wi is twice as wide)
    "modernbert": {
        "tiny": dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=192),
        "small": dict(num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=384),
        "base": dict(num_layers=22, num_heads=12, hidden_dim=768, intermediate_dim=1152),
        "large": dict(num_layers=28, num_heads=16, hidden_dim=1024, intermediate_dim=2624),
    },
}
# The masking rate each family pretrains with: the trainer's default, and ModernBERT's
# recipe (trainer/families/modernbert/record.py `pretraining_recipe`).
MASK_RATE = {"roberta": 0.15, "modernbert": 0.3}
# The vocabulary on an accelerator: RoBERTa's; ModernBERT's (a multiple of 64).
VOCAB = {"roberta": 50265, "modernbert": 50368}
# ModernBERT's layout (the backbone's defaults): a global layer every third from layer 0,
# the others attend within a band of `LOCAL_WINDOW` tokens (±64, both ends included).
GLOBAL_EVERY, LOCAL_WINDOW = 3, 128


def dense_weights(family: str, size: str) -> int:
    """Weights of the matrix products each token goes through: the encoder's and the LM
    head's transform (hidden x hidden). RoBERTa: q, k, v, o and a two-matrix feed-forward.
    ModernBERT: the fused Wqkv and Wo, GeGLU's Wi (hidden x 2 intermediate: input and gate)
    and Wo (intermediate x hidden). Biases, norms and the element-wise work are not counted."""
    s = SIZES[family][size]
    h, i = s["hidden_dim"], s["intermediate_dim"]
    per_layer = 4 * h * h + (3 * h * i if family == "modernbert" else 2 * h * i)
    return s["num_layers"] * per_layer + h * h


def keys_per_query(length: int, window: int | None) -> float:
    """Keys a query attends to, averaged over a row's positions: all of them in a global
    layer; in a local one those within ±window // 2 (fewer near the row's ends)."""
    if window is None or window // 2 >= length - 1:
        return float(length)
    half = window // 2
    total = sum(min(i, half) + min(length - 1 - i, half) + 1 for i in range(length))
    return total / length


def attended_keys(family: str, size: str, length: int) -> float:
    """Keys per query summed over the layers: layers x length for RoBERTa; for ModernBERT
    its global layers at the full length and its local layers within their band."""
    layers = SIZES[family][size]["num_layers"]
    if family != "modernbert":
        return layers * float(length)
    global_layers = len(range(0, layers, GLOBAL_EVERY))
    return global_layers * length + (layers - global_layers) * keys_per_query(length, LOCAL_WINDOW)


def flops_per_token(family: str, size: str, length: int, vocab: int) -> float:
    """Model FLOPs of one token in one training step (forward 2, backward 4 per product):

    6 x `dense_weights` + 6 x hidden x vocabulary x the masking rate (the vocabulary
    projection an MLM needs: our step computes it at the masked slots only, transformers at
    every position) + 12 x hidden x `attended_keys` (scores and values, forward 4 x hidden
    per key, backward twice that). Packed documents are not subtracted: a document mask
    makes a global layer's useful work smaller than length x length, but transformers'
    model attends across documents, and the count must be the same for both."""
    hidden = SIZES[family][size]["hidden_dim"]
    return (
        6 * dense_weights(family, size)
        + 6 * hidden * vocab * MASK_RATE[family]
        + 12 * hidden * attended_keys(family, size, length)
    )
