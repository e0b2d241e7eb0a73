"""Model families: one record per family, one module per family (as keras-hub keeps a model in
one folder and registers its Hugging Face exporter by backbone class).

A record says everything the trainer, the checkpoint finder, export and predict need to know:
the keras-hub classes, the backbone's registered name in presets, whether the backbone takes
segment ids, how to build the transformers config, and the keras-hub -> transformers weight
table. Adding a family is one new module here (registered below) plus its tests.

Example:
    >>> family = get("bert")
    >>> family.takes_segment_ids, family.hf_prefix
    (True, 'bert')
    >>> of_registered_name("keras_hub>RobertaBackbone").name
    'roberta'
"""

from __future__ import annotations

import dataclasses
from typing import Callable


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    backbone_class: str  # keras_hub.models.<name>
    task_class: str  # the MaskedLM task in keras_hub.models
    registered_name: str  # a preset's config.json "registered_name"
    takes_segment_ids: bool
    hf_config: Callable  # (backbone_config: dict, special_token_ids: dict) -> transformers config
    weight_rows: tuple  # (keras-hub path, transformers name, transform): embeddings and head
    hf_prefix: str  # the transformers base-model attribute ("roberta", "bert")

    def backbone_cls(self):
        import keras_hub

        return getattr(keras_hub.models, self.backbone_class)

    def task_cls(self):
        import keras_hub

        return getattr(keras_hub.models, self.task_class)

    def inputs(self, token_ids, padding_mask, mask_positions, zeros_like) -> dict:
        """The keras-hub MaskedLM input dict (one segment for MLM-only pretraining)."""
        features = {"token_ids": token_ids, "padding_mask": padding_mask,
                    "mask_positions": mask_positions}
        if self.takes_segment_ids:
            features["segment_ids"] = zeros_like(token_ids)
        return features


def _registry() -> dict[str, Family]:
    from trainer.families import bert, roberta

    return {f.name: f for f in (roberta.FAMILY, bert.FAMILY)}


NAMES = ("roberta", "bert")  # flag choices (kept literal so that --help imports nothing)


def get(name: str) -> Family:
    families = _registry()
    if name not in families:
        raise ValueError(f"model family {name!r} is not one of {tuple(families)}")
    return families[name]


def of_registered_name(registered_name: str | None) -> Family | None:
    """The family of a keras-hub preset's backbone, or None."""
    return next((f for f in _registry().values() if f.registered_name == registered_name), None)


def of_model(masked_lm) -> Family:
    """The family of a built keras-hub MaskedLM (by its backbone class)."""
    name = type(masked_lm.backbone).__name__
    found = next((f for f in _registry().values() if f.backbone_class == name), None)
    if found is None:
        raise ValueError(f"no model family is registered for backbone {name}")
    return found
