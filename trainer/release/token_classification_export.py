"""A fine-tuned tagger as transformers' `*ForTokenClassification` (RoBERTa, BERT, ModernBERT),
so that `pipeline("token-classification", model=folder)` gives the tags we scored.

The head is defined here, beside its transformers names, because the Keras model must compute
what transformers' class computes after the encoder, or the export would predict other tags:

- `RobertaForTokenClassification`, `BertForTokenClassification`: dropout, then `classifier`
  (a linear layer on every token's final hidden state; BERT's pooler is not used).
- `ModernBertForTokenClassification`: `head` (dense without bias, exact GELU, LayerNorm
  without bias: transformers' ModernBertPredictionHead, from the config's `classifier_bias`,
  `classifier_activation`, `norm_eps` and `norm_bias`), dropout, then `classifier`.

`head_layers` builds those layers in Keras (float32, named so that `head_tensors` finds them);
`export` writes the backbone's tensors under the family's transformers names
(`task_export.backbone_tensors`), the head's (a Keras kernel is transformers' weight
transposed), and a config with `architectures`, `id2label` and `label2id` (`num_labels`
follows from them), with the run's tokenizer files. The folder is written whole or not at all.

Which transformers class a family becomes is its masked-LM class's token-classification sibling
(`RobertaForMaskedLM` -> `RobertaForTokenClassification`); no family is named here.

Example:
    >>> layers = head_layers(family, backbone_config, info.special_token_ids, num_labels=5)
    >>> export(source, info, tagger, ("O", "B-PER", "I-PER"), "finetune/ner/hf")
    'finetune/ner/hf'
"""

from __future__ import annotations

import numpy as np

from common import folder_swap
from trainer.release import export as hf_export
from trainer.release import task_export

HEAD_DENSE, HEAD_NORM = "token_head_dense", "token_head_norm"
DROPOUT, LOGITS = "token_dropout", "token_logits"
# transformers' token classifiers whose modelling code runs a prediction head (`head`: dense,
# activation, LayerNorm) before the dropout and `classifier`; the others read the encoder's
# states directly. Checked by instantiating each class (the export's tests).
_PREDICTION_HEAD = frozenset({"ModernBertForTokenClassification"})
HEAD_DROPOUT = 0.1  # as the classifier's head (trainer/finetuning/classifier.py)
# transformers' activation names (ACT2FN) -> Keras': "gelu" is the exact (erf) GELU in both.
_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "silu": "silu"}


def architecture(family) -> str:
    """transformers' token-classification class of `family` (`Family` record)."""
    return family.hf_masked_lm_class.replace("ForMaskedLM", "ForTokenClassification")


def head_layers(
    family, backbone_config: dict, ids: dict, num_labels: int, dropout=HEAD_DROPOUT
) -> list:
    """The Keras layers after the encoder, in order, each in float32 (Keras' advice for the
    last layers under mixed precision; the head is small); `ids`: the special token ids the
    family's transformers config records."""
    import keras

    layers = []
    if architecture(family) in _PREDICTION_HEAD:
        config = family.hf_config(backbone_config, ids)
        if config.classifier_activation not in _ACTIVATIONS:
            raise ValueError(f"no Keras activation for {config.classifier_activation!r}")
        layers += [
            keras.layers.Dense(
                config.hidden_size,
                use_bias=bool(config.classifier_bias),
                activation=_ACTIVATIONS[config.classifier_activation],
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
                dtype="float32",
                name=HEAD_DENSE,
            ),
            keras.layers.LayerNormalization(
                epsilon=config.norm_eps,
                center=bool(config.norm_bias),
                dtype="float32",
                name=HEAD_NORM,
            ),
        ]
    layers += [
        keras.layers.Dropout(dropout, dtype="float32", name=DROPOUT),
        keras.layers.Dense(
            num_labels,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            dtype="float32",
            name=LOGITS,
        ),
    ]
    return layers


def _seeded(backbone, num_labels: int, seed: int, ids: dict, precision: str) -> tuple:
    """(the family's backbone in `precision`, with `backbone`'s weights unless from scratch;
    `head_layers`), seeded with `seed`: what both taggers are made of."""
    import keras

    from trainer.models import model

    keras.utils.set_random_seed(seed)
    encoder = model.build_backbone(backbone.family, backbone.config, model.dtype_policy(precision))
    if not backbone.from_scratch:
        encoder.set_weights(backbone.weights)
    return encoder, head_layers(backbone.family, backbone.config, ids, num_labels, HEAD_DROPOUT)


def tagger(backbone, num_labels: int, seed: int, ids: dict, precision: str = "fp32"):
    """The Keras model this module exports, seeded with `seed`: the family's backbone in
    `precision` (`backbone`, a `PretrainedBackbone`: its weights unless from scratch), then
    `head_layers`: logits per piece. The backbone is kept as an attribute, as keras-hub's
    tasks keep theirs."""
    import keras

    from trainer.models import pooling

    encoder, head = _seeded(backbone, num_labels, seed, ids, precision)
    states = pooling.token_states(encoder(encoder.input))
    for layer in head:
        states = layer(states)
    built = keras.Model(inputs=encoder.input, outputs=states)
    built.backbone = encoder
    return built


def packed_tagger(backbone, num_labels: int, seed: int, ids: dict, precision: str = "fp32"):
    """`tagger`'s model reading packed rows (trainer/finetuning/packed_rows.py: several
    sentences a row, read apart by the family's `packed_states`): the same backbone and head,
    built here on one row so that every variable exists before a compiled step."""
    from trainer.models import packed_models

    encoder, head = _seeded(backbone, num_labels, seed, ids, precision)
    built = packed_models.PackedTagger(encoder, head, backbone.family.packed_states)
    length = backbone.family.build_length(backbone.config)
    zeros = np.zeros((1, length), np.int32)
    built({"token_ids": zeros, "padding_mask": zeros + 1, "example_ids": zeros,
           "positions": np.arange(length, dtype=np.int32)[None]})  # fmt: skip
    return built


def _array(variable) -> np.ndarray:
    return np.asarray(variable.numpy(), np.float32)


def head_tensors(tagger) -> dict[str, np.ndarray]:
    """transformers name -> array of the head of `tagger` (a Keras model holding the layers of
    `head_layers`)."""
    names = {layer.name for layer in tagger.layers}
    logits = tagger.get_layer(LOGITS)
    tensors = {
        "classifier.weight": _array(logits.kernel).T,
        "classifier.bias": _array(logits.bias),
    }
    if HEAD_DENSE in names:
        dense, norm = tagger.get_layer(HEAD_DENSE), tagger.get_layer(HEAD_NORM)
        tensors["head.dense.weight"] = _array(dense.kernel).T
        if dense.use_bias:
            tensors["head.dense.bias"] = _array(dense.bias)
        tensors["head.norm.weight"] = _array(norm.gamma)
        if norm.center:
            tensors["head.norm.bias"] = _array(norm.beta)
    return tensors


def export(source, info, tagger, labels: tuple, output_dir: str) -> str:
    """Writes `tagger` (its `backbone` and head) as the family's `*ForTokenClassification`
    into `output_dir`, whole or not at all; `labels` in id order. Returns `output_dir`."""
    tensors = task_export.backbone_tensors(source, tagger.backbone, info.pad_id)
    tensors.update(head_tensors(tagger))
    updates = {
        "id2label": dict(enumerate(labels)),
        "label2id": {label: i for i, label in enumerate(labels)},
    }
    with folder_swap.whole_folder(output_dir, markers=(hf_export.HF_CONFIG,)) as stage:
        task_export.write_folder(source, info, tensors, architecture(source.family), updates, stage)
    return output_dir
