"""Model families and named sizes: keras-hub backbones built from config, from scratch.

Example:
    >>> config = backbone_config("roberta", "tiny", vocabulary_size=1000, max_sequence_length=128)
    >>> masked_lm = build_masked_lm("roberta", config)   # keras_hub.models.RobertaMaskedLM
"""

from __future__ import annotations

from trainer import families
from trainer.families.sizes import SIZES

def backbone_config(
    family: str,
    size: str,
    vocabulary_size: int,
    max_sequence_length: int,
    overrides: dict | None = None,
) -> dict:
    """The keyword arguments of the family's keras-hub backbone."""
    families.get(family)  # raises for an unknown family
    if size not in SIZES:
        raise ValueError(f"model size {size!r} is not one of {tuple(SIZES)}")
    config = dict(SIZES[size], vocabulary_size=vocabulary_size, dropout=0.1,
                  max_sequence_length=max_sequence_length)
    config.update(overrides or {})
    return config


def build_masked_lm(family: str, config: dict):
    """A keras-hub MaskedLM task (LM head only at `mask_positions`) with no preprocessor."""
    record = families.get(family)
    return record.task_cls()(backbone=record.backbone_cls()(**config), preprocessor=None)
