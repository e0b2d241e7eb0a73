"""The record that describes one model family (trainer/families/ registers one per module)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable

import keras_hub


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
    backbone_config_of: Callable  # the inverse of hf_config: (config.json dict) -> backbone args
    classifier_class: str = ""  # the TextClassifier task in keras_hub.models (fine-tuning)
    # The feed-forward activation keras-hub hard-codes in the backbone's encoder layers
    # (trainer/families/activation.py sets another when a checkpoint needs it).
    activation: str = "gelu"

    def backbone_cls(self):
        return getattr(keras_hub.models, self.backbone_class)

    def backbone_args(self) -> tuple[str, ...]:
        """The named arguments of the backbone's constructor (its `**kwargs` are Keras layer
        options such as `name`, not model configuration)."""
        parameters = inspect.signature(self.backbone_cls().__init__).parameters.values()
        return tuple(
            p.name
            for p in parameters
            if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        )

    def classifier_cls(self):
        return getattr(keras_hub.models, self.classifier_class)

    def task_cls(self):
        return getattr(keras_hub.models, self.task_class)

    def inputs(self, token_ids, padding_mask, mask_positions, zeros_like) -> dict:
        """The keras-hub MaskedLM input dict (one segment for MLM-only pretraining)."""
        features = {
            "token_ids": token_ids,
            "padding_mask": padding_mask,
            "mask_positions": mask_positions,
        }
        if self.takes_segment_ids:
            features["segment_ids"] = zeros_like(token_ids)
        return features
