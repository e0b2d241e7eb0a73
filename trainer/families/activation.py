"""The feed-forward activation of a family's encoder layers, when a checkpoint's differs from
the one keras-hub hard-codes (BertBackbone: the tanh GELU; RobertaBackbone: the exact GELU).

bert-base-uncased, the most used BERT checkpoint, says `hidden_act: "gelu"` (the exact, erf
GELU). keras-hub's BertBackbone takes no activation argument, so the builder sets the exact
one on every encoder layer after the backbone is made (`set_in`), and the run records it as
`backbone_config["activation"]` (absent: keras-hub's own), so that restarts, checkpoints,
predict, fine-tuning and the transformers export all rebuild the same computation. A
keras-hub preset cannot carry it (keras-hub rebuilds the backbone from its own config):
`trainer.export` refuses that format for such a model.

Example:
    >>> of_hf({"hidden_act": "gelu"}, "gelu_approximate")
    {'activation': 'gelu'}
    >>> hf_name({"activation": "gelu"}, "gelu_approximate")
    'gelu'
"""

from __future__ import annotations

KEY = "activation"  # in backbone_config; not a keras-hub backbone argument
# transformers `hidden_act` -> the Keras activation that computes it. gelu_new and
# gelu_pytorch_tanh are the same tanh formula as keras' gelu(approximate=True).
FROM_HF = {"gelu": "gelu", "gelu_pytorch_tanh": "gelu_approximate", "gelu_new": "gelu_approximate"}
TO_HF = {"gelu": "gelu", "gelu_approximate": "gelu_pytorch_tanh"}


def of(backbone_config: dict, default: str) -> str:
    return backbone_config.get(KEY) or default


def hf_name(backbone_config: dict, default: str) -> str:
    """transformers' `hidden_act` for a backbone config (the export writes it)."""
    return TO_HF[of(backbone_config, default)]


def same_in_hf(a, b) -> bool:
    """Whether two `hidden_act` values compute the same function."""
    return FROM_HF.get(a, a) == FROM_HF.get(b, b)


def of_hf(hf: dict, default: str) -> dict:
    """{KEY: name} for a transformers config whose activation is not keras-hub's `default`;
    {} otherwise (also for one we cannot compute: `trainer.models.init_from` refuses it by name)."""
    name = FROM_HF.get(hf.get("hidden_act"))
    return {KEY: name} if name is not None and name != default else {}


def without(backbone_config: dict) -> dict:
    """The keras-hub backbone's own constructor arguments."""
    return {k: v for k, v in backbone_config.items() if k != KEY}


def set_in(backbone, name: str) -> int:
    """Makes every encoder layer's feed-forward compute `name`; returns how many changed.
    Keras' Dense applies `self.activation` at each call, so the built functional graph
    computes the new one (as `trainer.models.model.fuse_attention` relies on for dropout)."""
    import keras

    function = (
        (lambda x: keras.activations.gelu(x, approximate=True))
        if name == "gelu_approximate"
        else keras.activations.get(name)
    )
    layers = getattr(backbone, "transformer_layers", [])
    for layer in layers:
        dense = getattr(layer, "_feedforward_intermediate_dense", None)
        if dense is None:  # a keras-hub whose encoder layer changed: never a silent no-op
            raise ValueError(
                f"{type(backbone).__name__}'s layer {layer.name} has no feed-forward Dense "
                f"to set the {name} activation on"
            )
        layer.activation = dense.activation = function
    if not layers:
        raise ValueError(f"{type(backbone).__name__} has no transformer_layers")
    return len(layers)
