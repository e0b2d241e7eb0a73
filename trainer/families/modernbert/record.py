"""The modernbert family's record: what the trainer, export and `--init_from` ask of it.

The weight rows are `convert.py`'s table (Keras variable path, transformers name, transform),
so that the export writes and `--init_from` reads ModernBERT checkpoints through the code every
family shares, and `convert` itself converts with the same rows.

Example:
    >>> FAMILY.weight_table(2)[6]
    ('layer_0/attn/wqkv/kernel', 'model.layers.0.attn.Wqkv.weight', transpose)
"""

from __future__ import annotations

from trainer.families.family import Family
from trainer.families.modernbert import attention, convert
from trainer.families.modernbert.backbone import ModernBertBackbone, config_problem
from trainer.families.modernbert.classifier import ModernBertTextClassifier
from trainer.families.modernbert.masked_lm import ModernBertMaskedLM
from trainer.families.modernbert.sizes import SIZES, Bounds

# The classes `Family` finds by name in `models_module` (this module).
__all__ = ["FAMILY", "ModernBertBackbone", "ModernBertMaskedLM", "ModernBertTextClassifier"]


def _separator(ids: dict) -> dict:
    """prepare starts every document with the tokenizer's cls (or bos) token: a new
    document, for attention and rotary positions, starts there (documents.py)."""
    return {"separator_id": ids["cls_token"]}


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
    preset_tokenizer=(),  # keras-hub has no ModernBERT tokenizer class
    pair_separators=1,  # [CLS] A [SEP] B [SEP], as BERT
    positions="rotary",
    hf_positions_after_pad=False,
    legacy_configs={},
    models_module=__name__,
    sizes=SIZES,
    dropout=0.0,  # ModernBERT pretrains without dropout (its configs' *_dropout are 0)
    token_args=_separator,
    packed_rows_only=("separator_id",),
    own_attention=True,
    spare_embeddings=True,
    context_extension_args=("global_rope_theta",),  # ModernBERT: 10,000 -> 160,000 at 8,192
    argument_bounds=Bounds,
    config_rule=config_problem,  # heads of an even size; no fused path with attention dropout
    device_rule=attention.training_problem,  # splash needs a TPU
    # ModernBERT's recipe (Warner et al. 2024, arXiv 2412.13663, "Training Settings"): 30 %
    # masking, a trapezoidal (warmup-stable-decay) schedule and StableAdamW's per-tensor update
    # clipping. Its other AdamW values (beta2 0.98, epsilon 1e-6) are the trainer's defaults;
    # its weight decay is decoupled from the rate (StableAdamW's), which Keras' AdamW is not,
    # so the trainer's default stays.
    pretraining_recipe={"mlm_probability": 0.3, "schedule": "wsd", "update_clipping": "on"},
)
