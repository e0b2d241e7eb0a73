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

from trainer.families import bert, roberta
from trainer.families.family import Family
from trainer.families.modernbert import record as modernbert


def _registry() -> dict[str, Family]:
    return {f.name: f for f in (roberta.FAMILY, bert.FAMILY, modernbert.FAMILY)}


ALL = tuple(_registry().values())
NAMES = tuple(_registry())  # --family's choices
DEFAULT = "roberta"  # --family's default


def get(name: str) -> Family:
    families = _registry()
    if name not in families:
        raise ValueError(f"model family {name!r} is not one of {tuple(families)}")
    return families[name]


def said(found=None) -> str:
    """The registered families (or those of `found`, records) as a message names them:
    `roberta, bert or modernbert`; messages read it, so a new family is named everywhere."""
    names = [f.name for f in (ALL if found is None else found)]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def of_registered_name(registered_name: str | None) -> Family | None:
    """The family of a keras-hub preset's backbone, or None."""
    return next((f for f in _registry().values() if f.registered_name == registered_name), None)


def of_model(masked_lm) -> Family:
    """The family of a built MaskedLM or classifier (by its backbone class)."""
    return of_backbone(masked_lm.backbone)


def of_backbone(backbone) -> Family:
    """The family of a built backbone (by its class)."""
    name = type(backbone).__name__
    found = next((f for f in _registry().values() if f.backbone_class == name), None)
    if found is None:
        raise ValueError(f"no model family is registered for backbone {name}")
    return found
