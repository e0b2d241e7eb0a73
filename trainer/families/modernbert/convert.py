"""ModernBERT both ways with transformers: `ModernBertMaskedLM` <-> `ModernBertForMaskedLM`.

The config is written as transformers 5 writes it (`layer_types`, `rope_parameters` per
layer type, `local_attention`); older hub configs (`global_attn_every_n_layers`,
`global_rope_theta`, `local_rope_theta`) are read through `ModernBertConfig`, which turns them
into those. Every field of `ModernBertConfig` that changes what the model computes is either
represented by a backbone argument or refused in one line (`UserError`) by name:

- represented: vocab_size, hidden_size, intermediate_size, num_hidden_layers,
  num_attention_heads, max_position_embeddings, local_attention (the backbone's shape);
  layer_types (`global_attention_every`: refused unless global every n-th layer from 0);
  rope_parameters (`global_rope_theta`, `local_rope_theta`: refused for a rope_type other
  than default or other keys); attention_dropout; embedding_dropout and mlp_dropout
  (`dropout`: refused where they differ).
- refused unless as here: hidden_activation and classifier_activation (the MLM head's)
  "gelu" (exact); norm_bias, attention_bias, mlp_bias, classifier_bias (the MLM head's
  dense) False; norm_eps 1e-5; decoder_bias and tie_word_embeddings True; head_dim
  hidden_size / num_attention_heads.
- no effect on a converted MLM model: initializer_range, initializer_cutoff_factor
  (initialisation); classifier_pooling, classifier_dropout (fine-tuning heads);
  sparse_prediction, sparse_pred_ignore_index (ours always runs the head at
  mask_positions only); deterministic_flash_attn (a kernel's determinism); the special
  token ids (nothing attends to padding here, so the pad row's gradient is the same).

transformers' ModernBertModel has no packed-document mask: a model trained on packed rows
(`separator_id`) computes the same there on rows of one document, which is how it is used
after pretraining; `separator_id` is not part of the transformers config.

Example:
    >>> config, state = to_transformers(masked_lm, {"pad_token": 0, "cls_token": 2, ...})
    >>> hf = transformers_model(masked_lm)           # a ModernBertForMaskedLM
    >>> masked_lm = from_transformers(hf)            # back to ours
"""

from __future__ import annotations

import numpy as np

from common.errors import UserError
from trainer.families.encoder_weights import copy, transpose
from trainer.families.modernbert.backbone import GLOBAL, LOCAL, layer_types, padded
from trainer.families.modernbert.layers import NORM_EPSILON

ROLES = {  # transformers config field -> the project's special-token role
    "pad_token_id": "pad_token",
    "cls_token_id": "cls_token",
    "sep_token_id": "sep_token",
    "bos_token_id": "cls_token",  # ModernBERT's bos/eos are its cls/sep
    "eos_token_id": "sep_token",
}


def hf_config(backbone_config: dict, ids: dict | None = None):
    """A transformers ModernBertConfig for a `ModernBertBackbone` config (`ids`: role ->
    token id, e.g. {"pad_token": 0, "cls_token": 2, ...})."""
    from transformers import ModernBertConfig

    c, ids = backbone_config, ids or {}
    return ModernBertConfig(
        vocab_size=padded(c["vocabulary_size"], c.get("vocabulary_multiple", 64)),
        hidden_size=c["hidden_dim"],
        intermediate_size=c["intermediate_dim"],
        num_hidden_layers=c["num_layers"],
        num_attention_heads=c["num_heads"],
        hidden_activation="gelu",
        max_position_embeddings=c.get("max_sequence_length", 8192),
        norm_eps=NORM_EPSILON,
        norm_bias=False,
        attention_bias=False,
        mlp_bias=False,
        decoder_bias=True,
        classifier_bias=False,
        classifier_activation="gelu",
        attention_dropout=c.get("attention_dropout", 0.0),
        embedding_dropout=c.get("dropout", 0.0),
        mlp_dropout=c.get("dropout", 0.0),
        layer_types=layer_types(c["num_layers"], c.get("global_attention_every", 3)),
        rope_parameters={
            GLOBAL: {"rope_type": "default", "rope_theta": c.get("global_rope_theta", 160_000.0)},
            LOCAL: {"rope_type": "default", "rope_theta": c.get("local_rope_theta", 10_000.0)},
        },
        local_attention=c.get("local_window", 128),
        tie_word_embeddings=True,
        architectures=["ModernBertForMaskedLM"],
        **{field: ids.get(role) for field, role in ROLES.items()},
    )


def _refuse(name, value, wanted) -> None:
    raise UserError(
        f"transformers ModernBertConfig {name}={value!r} is not supported "
        f"(this ModernBERT has {wanted})"
    )


def _every(types: list) -> int:
    """n where `types` is global every n-th layer from layer 0 (n > len: only layer 0)."""
    for n in range(1, len(types) + 2):
        if types == layer_types(len(types), n):
            return n
    _refuse("layer_types", types, "a global layer every n-th layer from layer 0")


def _theta(rope: dict, kind: str) -> float:
    params = dict(rope.get(kind) or {})
    if params.pop("rope_type", "default") != "default" or set(params) - {"rope_theta"}:
        _refuse(f"rope_parameters[{kind!r}]", rope.get(kind), "default rotary positions")
    return float(params["rope_theta"])


def _check(hf) -> None:
    fixed = {
        "hidden_activation": "gelu",
        "classifier_activation": "gelu",
        "norm_bias": False,
        "attention_bias": False,
        "mlp_bias": False,
        "classifier_bias": False,
        "decoder_bias": True,
        "tie_word_embeddings": True,
    }
    for name, wanted in fixed.items():
        if getattr(hf, name) != wanted:
            _refuse(name, getattr(hf, name), f"{name}={wanted!r}")
    if not np.isclose(hf.norm_eps, NORM_EPSILON, rtol=0, atol=1e-12):
        _refuse("norm_eps", hf.norm_eps, f"norm_eps={NORM_EPSILON}")
    head_dim = getattr(hf, "head_dim", None)
    if head_dim and head_dim != hf.hidden_size // hf.num_attention_heads:
        _refuse("head_dim", head_dim, "head_dim = hidden_size / num_attention_heads")
    if hf.embedding_dropout != hf.mlp_dropout:
        _refuse(
            "embedding_dropout",
            hf.embedding_dropout,
            f"one dropout for embeddings and MLP (mlp_dropout={hf.mlp_dropout!r})",
        )


def _read(fields: dict):
    """transformers' ModernBertConfig of a config.json's fields; what it refuses (a field of
    another type) or fails on (a global layer every 0 layers divides by 0) in one line."""
    from huggingface_hub.errors import StrictDataclassError
    from transformers import ModernBertConfig

    every = fields.get("global_attn_every_n_layers", 3)  # the older hub configs' layer pattern
    if fields.get("layer_types") is None and (type(every) is not int or every == 0):
        _refuse("global_attn_every_n_layers", every, "a global layer every n-th layer, n >= 1")
    try:
        return ModernBertConfig.from_dict(fields)
    except (StrictDataclassError, TypeError, ValueError) as err:
        detail = " ".join(str(err).split())
        raise UserError(f"transformers' ModernBertConfig refuses it: {detail}") from None


def backbone_config(hf) -> dict:
    """`ModernBertBackbone` arguments for a transformers ModernBertConfig (or its dict, as in
    a config.json, older field names included); raises UserError for what it cannot hold."""
    if isinstance(hf, dict):
        hf = _read(hf)
    _check(hf)
    return dict(
        vocabulary_size=hf.vocab_size,
        num_layers=hf.num_hidden_layers,
        num_heads=hf.num_attention_heads,
        hidden_dim=hf.hidden_size,
        intermediate_dim=hf.intermediate_size,
        dropout=float(hf.embedding_dropout),
        attention_dropout=float(hf.attention_dropout),
        max_sequence_length=hf.max_position_embeddings,
        global_attention_every=_every(list(hf.layer_types)),
        local_window=hf.local_attention,
        global_rope_theta=_theta(hf.rope_parameters, GLOBAL),
        local_rope_theta=_theta(hf.rope_parameters, LOCAL),
        # a vocabulary that is not a multiple of 64 stays as it is, so the round trip is exact
        vocabulary_multiple=64 if hf.vocab_size % 64 == 0 else 1,
    )


# Keras variable path -> transformers name, as the export's table (trainer/families/family.py):
# the embeddings, norms and head, then each layer's rows; kernels transposed ([in, out] in
# Keras, [out, in] in torch); the tied decoder weight is the token embedding (not listed).
ROWS = (
    ("token_embedding/embeddings", "model.embeddings.tok_embeddings.weight", copy),
    ("embeddings_norm/gamma", "model.embeddings.norm.weight", copy),
    ("final_norm/gamma", "model.final_norm.weight", copy),
    ("mlm_head/dense/kernel", "head.dense.weight", transpose),
    ("mlm_head/norm/gamma", "head.norm.weight", copy),
    ("mlm_head/decoder_bias", "decoder.bias", copy),
)


def layer_rows(index: int) -> tuple:
    """One encoder layer's rows; the first layer has no attention norm (transformers'
    ModernBERT makes it an identity, as the backbone does)."""
    rows = (
        ("layer_{i}/attn/wqkv/kernel", "{m}.layers.{i}.attn.Wqkv.weight", transpose),
        ("layer_{i}/attn/wo/kernel", "{m}.layers.{i}.attn.Wo.weight", transpose),
        ("layer_{i}/mlp_norm/gamma", "{m}.layers.{i}.mlp_norm.weight", copy),
        ("layer_{i}/mlp_wi/kernel", "{m}.layers.{i}.mlp.Wi.weight", transpose),
        ("layer_{i}/mlp_wo/kernel", "{m}.layers.{i}.mlp.Wo.weight", transpose),
    )
    if index == 0:
        return rows
    return (("layer_{i}/attn_norm/gamma", "{m}.layers.{i}.attn_norm.weight", copy), *rows)


def _table(num_layers: int) -> list:
    layers = [
        (k.format(i=i), h.format(i=i, m="model"), t)
        for i in range(num_layers)
        for k, h, t in layer_rows(i)
    ]
    return [*ROWS, *layers]


def to_transformers(masked_lm, ids: dict | None = None):
    """(ModernBertConfig, state dict of float32 numpy arrays) of a `ModernBertMaskedLM`."""
    config = hf_config(masked_lm.backbone.get_config(), ids)
    variables = {v.path: v for v in masked_lm.weights}
    state = {
        name: np.ascontiguousarray(transform(np.asarray(variables[path].numpy(), np.float32), None))
        for path, name, transform in _table(masked_lm.backbone.num_layers)
    }
    state["decoder.weight"] = state["model.embeddings.tok_embeddings.weight"]
    return config, state


def transformers_model(masked_lm, ids: dict | None = None):
    """A transformers ModernBertForMaskedLM holding the model's weights (float32, eval mode)."""
    import torch
    from transformers import ModernBertForMaskedLM

    config, state = to_transformers(masked_lm, ids)
    model = ModernBertForMaskedLM(config)
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()})
    return model.eval()


def from_transformers(hf_model, **backbone_overrides):
    """A `ModernBertMaskedLM` with the weights of a transformers ModernBertForMaskedLM
    (`backbone_overrides`: e.g. separator_id, attention_path, dtype)."""
    from trainer.families.modernbert.backbone import ModernBertBackbone
    from trainer.families.modernbert.masked_lm import ModernBertMaskedLM

    config = {**backbone_config(hf_model.config), **backbone_overrides}
    masked_lm = ModernBertMaskedLM(ModernBertBackbone(**config), compile=False)
    state = {k: v.detach().float().cpu().numpy() for k, v in hf_model.state_dict().items()}
    if not np.array_equal(state["decoder.weight"], state["model.embeddings.tok_embeddings.weight"]):
        raise UserError("the transformers model's decoder is not tied to its token embedding")
    variables = {v.path: v for v in masked_lm.weights}
    for path, name, transform in _table(masked_lm.backbone.num_layers):
        variables[path].assign(transform.inverse(state[name], None))
    return masked_lm
