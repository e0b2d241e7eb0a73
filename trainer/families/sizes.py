"""Named model sizes, shared by every family: the shape arguments of a keras-hub encoder.

base/large are RoBERTa-base/large (and BERT's); tiny/small are for tests, the demo and CPU
benchmarks. `--model` chooses one; `--config` overrides single fields, within the bounds
`Shape` declares (trainer/models/model.py check_overrides).
"""

from __future__ import annotations

import dataclasses

from common.flags import flag

SIZES = {
    "tiny": dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=512),
    "small": dict(num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=1024),
    "base": dict(num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072),
    "large": dict(num_layers=24, num_heads=16, hidden_dim=1024, intermediate_dim=4096),
}
NAMES = tuple(SIZES)


@dataclasses.dataclass
class Shape:
    """The bounds of the backbone arguments `--config` may set (a family's backbone takes
    some of them; which ones comes from its constructor, trainer/families/family.py)."""

    num_layers: int = flag("Transformer layers.", minimum=1)
    num_heads: int = flag("Attention heads; hidden_dim must be a multiple.", minimum=1)
    hidden_dim: int = flag("Width of the hidden states.", minimum=1)
    intermediate_dim: int = flag("Width of the feed-forward layer.", minimum=1)
    dropout: float = flag("Dropout rate.", minimum=0, less_than=1)
    num_segments: int = flag("Segment ids (BERT).", minimum=1)
