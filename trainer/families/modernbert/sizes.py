"""ModernBERT's named sizes (the shape arguments of `ModernBertBackbone`) and the bounds of the
arguments it adds to the shared `Shape` (trainer/families/sizes.py).

base and large are ModernBERT-base and -large (answerdotai's configs); tiny and small have
the depth, heads and width of the project's tiny and small (trainer/families/sizes.py) with
base's GeGLU ratio (intermediate 1.5 x hidden: the input projection is twice that).

Example:
    >>> ModernBertBackbone(vocabulary_size=8000, **SIZES["tiny"])
"""

from __future__ import annotations

import dataclasses

from common.flags import flag
from trainer.families.modernbert.attention import PATHS

SIZES = {
    "tiny": dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=192),
    "small": dict(num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=384),
    "base": dict(num_layers=22, num_heads=12, hidden_dim=768, intermediate_dim=1152),
    "large": dict(num_layers=28, num_heads=16, hidden_dim=1024, intermediate_dim=2624),
}


@dataclasses.dataclass
class Bounds:
    """Every backbone argument of ModernBERT's own that changes what it computes, with its
    bounds (`Family.argument_bounds`: checked with `Shape`'s on --config and on a transformers
    config that --init_from reads, trainer/models/model.py)."""

    attention_dropout: float = flag(
        "Dropout on the attention probabilities.", minimum=0, less_than=1
    )
    global_attention_every: int = flag("A global layer every N layers, from layer 0.", minimum=1)
    # A local layer attends |i - j| <= local_window // 2, as transformers does: under 2 the
    # band holds the token alone, and a negative band holds nothing, which the softmax would
    # spread over every key (other documents and padding included).
    local_window: int = flag("The whole window of a local layer, in tokens.", minimum=2)
    global_rope_theta: float = flag("Rotary base of the global layers.", greater_than=0)
    local_rope_theta: float = flag("Rotary base of the local layers.", greater_than=0)
    vocabulary_multiple: int = flag("Embedding rows are padded to a multiple of it.", minimum=1)
    attention_path: str = flag("The attention kernel (attention.py).", choices=PATHS)
