"""ModernBERT's named sizes: the shape arguments of `ModernBertBackbone`.

base and large are ModernBERT-base and -large (answerdotai's configs); tiny and small have
the depth, heads and width of the project's tiny and small (trainer/families/sizes.py) with
base's GeGLU ratio (intermediate 1.5 x hidden: the input projection is twice that).

Example:
    >>> ModernBertBackbone(vocabulary_size=8000, **SIZES["tiny"])
"""

SIZES = {
    "tiny": dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=192),
    "small": dict(num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=384),
    "base": dict(num_layers=22, num_heads=12, hidden_dim=768, intermediate_dim=1152),
    "large": dict(num_layers=28, num_heads=16, hidden_dim=1024, intermediate_dim=2624),
}
