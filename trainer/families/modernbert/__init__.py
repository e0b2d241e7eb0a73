"""ModernBERT (transformers' ModernBertForMaskedLM) in Keras 3 for TensorFlow and JAX.

backbone.py (the encoder), masked_lm.py (the MLM task), classifier.py (the fine-tuning head),
packed.py (several fine-tuning examples a row),
layers.py, attention.py (the masked attention paths), documents.py (packed documents),
convert.py (to and from transformers), sizes.py (named sizes), record.py (the family record
the trainer asks; it imports the model classes, which registers them for Keras saving).
The package itself imports nothing, so its modules import each other without a cycle.
"""
