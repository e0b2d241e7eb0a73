"""ModernBERT (transformers' ModernBertForMaskedLM) in Keras 3 for TensorFlow and JAX.

backbone.py (the encoder), masked_lm.py (the MLM task), layers.py, attention.py (the
masked attention paths), documents.py (packed documents), classifier.py (the fine-tuning
head), convert.py (to and from transformers), sizes.py (named sizes), record.py (the family
record the trainer asks).
"""

from trainer.families.modernbert.backbone import ModernBertBackbone
from trainer.families.modernbert.classifier import ModernBertTextClassifier
from trainer.families.modernbert.masked_lm import ModernBertMaskedLM, ModernBertMaskedLMHead
from trainer.families.modernbert.sizes import SIZES

__all__ = [
    "SIZES",
    "ModernBertBackbone",
    "ModernBertMaskedLM",
    "ModernBertMaskedLMHead",
    "ModernBertTextClassifier",
]
