"""Named model sizes, shared by every family: the shape arguments of a keras-hub encoder.

base/large are RoBERTa-base/large (and BERT's); tiny/small are for tests, the demo and CPU
benchmarks. `--model` chooses one; `--config` overrides single fields.
"""

from __future__ import annotations

SIZES = {
    "tiny": dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=512),
    "small": dict(num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=1024),
    "base": dict(num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072),
    "large": dict(num_layers=24, num_heads=16, hidden_dim=1024, intermediate_dim=4096),
}
NAMES = tuple(SIZES)
