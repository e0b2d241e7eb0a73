"""The modernbert family's record: what the trainer, export and `--init_from` ask of it.

The weight rows are `convert.py`'s table (Keras variable path, transformers name, transform),
so that the export writes and `--init_from` reads ModernBERT checkpoints through the code every
family shares, and `convert` itself converts with the same rows.

Example:
    >>> FAMILY.weight_table(2)[6]
    ('layer_0/attn/wqkv/kernel', 'model.layers.0.attn.Wqkv.weight', transpose)
"""

from __future__ import annotations

import inspect

from trainer.families.family import SET_BY_TRAINER, Family
from trainer.families.modernbert import attention, convert, packed
from trainer.families.modernbert.backbone import (
    GLOBAL,
    ModernBertBackbone,
    config_problem,
    layer_types,
)
from trainer.families.modernbert.classifier import ModernBertTextClassifier
from trainer.families.modernbert.masked_lm import ModernBertMaskedLM
from trainer.families.modernbert.sizes import SIZES, Bounds

# The classes `Family` finds by name in `models_module` (this module).
__all__ = ["FAMILY", "ModernBertBackbone", "ModernBertMaskedLM", "ModernBertTextClassifier"]


def _separator(ids: dict) -> dict:
    """prepare starts every document with the tokenizer's cls (or bos) token: a new
    document, for attention and rotary positions, starts there (documents.py)."""
    return {"separator_id": ids["cls_token"]}


def _windows(config: dict) -> tuple:
    """Per layer, the band a local layer attends, None for a global one, as the backbone
    lays them out (a config without the arguments has the backbone's defaults)."""
    defaults = inspect.signature(ModernBertBackbone.__init__).parameters
    every, window = (
        config.get(name, defaults[name].default)
        for name in ("global_attention_every", "local_window")
    )
    kinds = layer_types(config["num_layers"], every)
    return tuple(None if kind == GLOBAL else window for kind in kinds)


# Every field of transformers' ModernBertConfig that changes what the model computes
# (convert.py's "represented" and "refused unless as here"): each must round-trip.
HF_COMPUTED = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "max_position_embeddings",
    "local_attention",
    "layer_types",
    "rope_parameters",
    "attention_dropout",
    "embedding_dropout",
    "mlp_dropout",
    "hidden_activation",
    "classifier_activation",
    "norm_eps",
    "norm_bias",
    "attention_bias",
    "mlp_bias",
    "classifier_bias",
    "decoder_bias",
    "tie_word_embeddings",
)


FAMILY = Family(
    name="modernbert",
    backbone_class="ModernBertBackbone",
    task_class="ModernBertMaskedLM",
    registered_name="mlm_pretrain>ModernBertBackbone",
    takes_segment_ids=False,
    hf_config=convert.hf_config,
    weight_rows=convert.ROWS,
    hf_prefix="model",
    backbone_config_of=convert.backbone_config,
    classifier_class="ModernBertTextClassifier",
    layer_rows=convert.layer_rows,
    hf_masked_lm_class="ModernBertForMaskedLM",
    tied={"decoder.weight": "model.embeddings.tok_embeddings.weight"},
    not_mlm=(),
    hub_checkpoint="answerdotai/ModernBERT-base",
    hub_vocabulary=50368,  # its tokenizer's 50,280 padded to a multiple of 64
    preset_tokenizer=(),  # keras-hub has no ModernBERT tokenizer class
    pair_separators=1,  # [CLS] A [SEP] B [SEP], as BERT
    positions="rotary",
    hf_positions_after_pad=False,
    legacy_configs={},
    # the document separator: the tokenizer's cls token (`_separator`)
    set_by_trainer={**SET_BY_TRAINER, "separator_id": "the tokenizer"},
    hf_computed=HF_COMPUTED,
    models_module=__name__,
    sizes=SIZES,
    dropout=0.0,  # ModernBERT pretrains without dropout (its configs' *_dropout are 0)
    token_args=_separator,
    packed_rows_only=("separator_id",),
    packed_states=packed.packed_states,  # several fine-tuning examples a row
    own_attention=True,
    spare_embeddings=True,
    context_extension_args=("global_rope_theta",),  # ModernBERT: 10,000 -> 160,000 at 8,192
    argument_bounds=Bounds,
    config_rule=config_problem,  # heads of an even size; no fused path with attention dropout
    device_rule=attention.training_problem,  # splash needs a TPU
    gated_feed_forward=True,  # GeGLU
    attention_windows=_windows,  # a global layer every third, the others a 128-token band
    portable_attention={"attention_path": "portable"},  # XLA's attention (attention.py)
    # ModernBERT's recipe (Warner et al. 2024, arXiv 2412.13663, "Training Settings"): 30 %
    # masking, a trapezoidal (warmup-stable-decay) schedule and StableAdamW's per-tensor update
    # clipping. Its other AdamW values (beta2 0.98, epsilon 1e-6) are the trainer's defaults;
    # its weight decay is decoupled from the rate (StableAdamW's), which Keras' AdamW is not,
    # so the trainer's default stays.
    pretraining_recipe={"mlm_probability": 0.3, "schedule": "wsd", "update_clipping": "on"},
)
