"""A fine-tuned cross-encoder (one relevance logit per (query, passage)) as a transformers
`*ForSequenceClassification` folder with `num_labels` 1, which sentence-transformers'
`CrossEncoder(folder)` loads with no code of ours and scores as we do. The folder is any
fine-tuned classifier's (`write_classifier`, N logits): the classification job's export
(`classifier_export`) writes it with its labels.

The backbone's tensors are the masked-LM export's names (`task_export.backbone_tensors`);
the head's are mapped here, found by the Keras classifier's layers rather than by the
family's name (each head below is the transformers class's, checked by the tests against
the classes themselves, instantiated):

- a `pooled_dense` Dense (keras-hub's RoBERTa head: first token, dense + tanh, logits):
  `classifier.dense`, `classifier.out_proj` (transformers' RobertaClassificationHead);
- no `pooled_dense` on the classifier (keras-hub's BERT reads its backbone's pooler, dense +
  tanh on the first token): `{prefix}.pooler.dense`, `classifier`;
- a `pooled_dense` prediction head (our ModernBERT's: dense without bias, exact GELU,
  LayerNorm without bias): `head.dense`, `head.norm`, `classifier`, and the config's
  `classifier_pooling` says what it reads (cls or mean). A transformers config without
  `classifier_pooling` reads the first token only: mean pooling is refused there
  (`pooling_problem`).

What CrossEncoder computes: transformers' logit equals ours (fp32, within 1e-4; the tests
measure it); `CrossEncoder.predict` returns sigmoid(logit) for one label, the probability of
relevance that binary cross-entropy trained, which config.json's
`sentence_transformers.activation_fn` states (pass `activation_fn=torch.nn.Identity()` for the
logit). The tokenizer files frame a pair as `packing.Packer` does (`<s> a </s></s> b </s>`
or `[CLS] a [SEP] b [SEP]`, segment ids 0 then 1 where the family takes them): the
tokenizer.json's post-processor is kept when it already does (the caller's `frame`, packing's
own, says how the model read a pair: this room is below fine-tuning's), else replaced by that
template (said in the returned note); control tokens' strings in a text stay text
(`split_special_tokens`); `model_max_length` is the fine-tuning's length. Truncation: the same
ids, `packing.truncate_pair` cutting as `tokenizers`' longest_first does.

Example:
    >>> frame = lambda a, b: (ids, segment_ids)       # packing.Packer's, no cut
    >>> note = check(source, info, 128, frame)         # before training: one line if it cannot
    >>> export(source, info, model, "cls", 128, "out/hf", frame)
    'out/hf'
"""

from __future__ import annotations

import tempfile

import keras
import numpy as np

from common import folder_swap, fs, tokenizer_files
from common.errors import UserError
from trainer.release import export as hf_export
from trainer.release import task_export

# sentence-transformers' CrossEncoder reads this from config.json (6.3.0's
# `get_default_activation_fn`): sigmoid, its own default for one label, stated.
ACTIVATION = {"activation_fn": "torch.nn.modules.activation.Sigmoid", "version": "6.3.0"}
PREDICT = (
    "CrossEncoder(path).predict(pairs) gives sigmoid(logit), the probability of relevance "
    "binary cross-entropy trained; activation_fn=torch.nn.Identity() gives the logit"
)
# A pair quoting control tokens (read as characters on both sides) and of several words.
_PROBE = ("which word <s> [CLS] comes first", "the first word [SEP] </s> here")


class CrossEncoderExportError(UserError):
    """The model cannot be written as a cross-encoder; one line for the user."""


def architecture(family) -> str:
    """transformers' sequence-classification class of the family (`RobertaFor...`)."""
    return family.hf_masked_lm_class.replace("ForMaskedLM", "ForSequenceClassification")


def pooling_problem(family, backbone_config: dict, ids: dict, pooling: str) -> str | None:
    """Why the transformers class cannot read the vector our head reads, or None."""
    config = family.hf_config(backbone_config, ids)
    if pooling == "cls" or hasattr(config, "classifier_pooling"):
        return None
    return (
        f"--pooling {pooling}: transformers' {architecture(family)} reads the first token "
        "only, so the export would score other vectors; use --pooling cls"
    )


def _dense(layer, name: str) -> dict:
    """A Keras Dense as transformers' Linear: the kernel transposed, the bias if any."""
    tensors = {f"{name}.weight": np.asarray(keras.ops.convert_to_numpy(layer.kernel)).T}
    if layer.use_bias:
        tensors[f"{name}.bias"] = np.asarray(keras.ops.convert_to_numpy(layer.bias))
    return tensors


def _layer(model, name: str):
    try:
        return model.get_layer(name)
    except ValueError:
        return None


def head_tensors(model, prefix: str) -> dict[str, np.ndarray]:
    """transformers name -> array of the classifier's head (module docstring), whatever its
    number of logits: each Dense maps as it is, so N labels are N rows of `classifier`."""
    logits = model.get_layer("logits")
    pooled = _layer(model, "pooled_dense")
    if pooled is None:  # the backbone's pooler feeds the logits
        pooler = model.backbone.get_layer("pooled_dense")
        return {**_dense(pooler, f"{prefix}.pooler.dense"), **_dense(logits, "classifier")}
    if isinstance(pooled, keras.layers.Dense):
        return {**_dense(pooled, "classifier.dense"), **_dense(logits, "classifier.out_proj")}
    gamma = np.asarray(keras.ops.convert_to_numpy(pooled.norm.gamma))
    return {
        **_dense(pooled.dense, "head.dense"),
        "head.norm.weight": gamma,
        **_dense(logits, "classifier"),
    }


def _template(family, info, tokenizer):
    """The post-processor that frames a pair as `packing.Packer` does."""
    from tokenizers import processors

    ids = info.special_token_ids
    cls, sep = (tokenizer.id_to_token(ids[role]) for role in ("cls_token", "sep_token"))
    second = 1 if family.takes_segment_ids else 0
    tail = [f"{sep}:{second}"] * (family.pair_separators - 1) + [f"$B:{second}", f"{sep}:{second}"]
    return processors.TemplateProcessing(
        single=f"{cls} $A {sep}",
        pair=" ".join([cls, "$A", sep, *tail]),
        special_tokens=[(cls, ids["cls_token"]), (sep, ids["sep_token"])],
    )


def _framings(source, folder: str, frame) -> tuple[tuple, tuple]:
    """(ours, transformers') ids and segment ids of the probe pair, whole."""
    from transformers import AutoTokenizer

    ids, segments = frame(*_PROBE)
    ours = (list(ids), list(segments) if source.family.takes_segment_ids else None)
    loaded = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    loaded.model_max_length = 1 << 30  # no warning for a probe longer than the model
    framed = loaded(*_PROBE, truncation=False)
    return ours, (framed["input_ids"], framed.get("token_type_ids"))


def write_tokenizer(source, info, max_length: int, folder: str, frame) -> str:
    """The tokenizer files into `folder`, framing pairs as `frame(query, passage) -> (ids,
    segment ids)` does (`packing.Packer`'s, uncut); returns a note (empty when tokenizer.json
    was kept as it is)."""
    tokenizer_files.copy(source.tokenizer_dir, folder)
    config_path = fs.join(folder, tokenizer_files.TOKENIZER_CONFIG)
    inputs = ["input_ids", "attention_mask"]
    if source.family.takes_segment_ids:  # else transformers would feed segment 0 throughout
        inputs.insert(1, "token_type_ids")
    config = fs.read_json(config_path) | {
        "model_max_length": max_length,  # the length our scores were computed at
        "model_input_names": inputs,
        "split_special_tokens": True,  # `<s>` in a text is text, as packing reads it
    }
    fs.write_json(config_path, config)
    ours, theirs = _framings(source, folder, frame)
    if ours == theirs:
        return ""
    tokenizer, _ = tokenizer_files.load(folder)
    tokenizer.post_processor = _template(source.family, info, tokenizer)
    json_path = fs.join(folder, tokenizer_files.TOKENIZER_JSON)
    fs.write_bytes(json_path, tokenizer.to_str(pretty=True).encode("utf-8"))
    ours, theirs = _framings(source, folder, frame)
    if ours != theirs:
        raise CrossEncoderExportError(
            f"{source.tokenizer_dir}: transformers frames a pair as {theirs[0]}, the model "
            f"read it as {ours[0]}; the transformers export cannot match them"
        )
    return (
        f"the export's tokenizer.json frames a pair as the model read it "
        f"({source.family.pair_separators} separator(s) between the texts); "
        f"{source.tokenizer_dir}'s post-processor did not"
    )


def check(source, info, max_length: int, frame) -> str:
    """What `export` would find wrong with the tokenizer, before any training: raises in one
    line, or returns the note its tokenizer files would get."""
    with tempfile.TemporaryDirectory() as folder:
        return write_tokenizer(source, info, max_length, folder, frame)


def write_classifier(
    source, info, model, pooling: str, max_length: int, output_dir: str, frame, labels: dict
) -> str:
    """Writes `model` (a fine-tuned keras-hub classifier, any number of logits) as the
    family's `*ForSequenceClassification` folder whole (`folder_swap`: an earlier export there
    is replaced), `labels` the config's entries that say what its logits are (`num_labels`,
    `id2label`, `problem_type`...); returns `output_dir`. The cross-encoder (`export`) and the
    classification job's export (`classifier_export`) are both this folder."""
    family, config = source.family, source.record.backbone_config
    problem = pooling_problem(family, config, info.special_token_ids, pooling)
    if problem:
        raise CrossEncoderExportError(problem)
    tensors = task_export.backbone_tensors(source, model.backbone, info.pad_id)
    tensors.update(head_tensors(model, family.hf_prefix))
    updates = dict(labels)
    if hasattr(family.hf_config(config, info.special_token_ids), "classifier_pooling"):
        updates["classifier_pooling"] = pooling
    with folder_swap.whole_folder(output_dir, markers=(hf_export.HF_CONFIG,)) as stage:
        task_export.write_folder(source, info, tensors, architecture(family), updates, stage)
        write_tokenizer(source, info, max_length, stage, frame)
    return output_dir


def export(source, info, model, pooling: str, max_length: int, output_dir: str, frame) -> str:
    """Writes `model` (the fine-tuned keras-hub classifier, one logit) as a cross-encoder
    folder (`write_classifier`); returns `output_dir`."""
    labels = {"num_labels": 1, "sentence_transformers": dict(ACTIVATION)}
    return write_classifier(source, info, model, pooling, max_length, output_dir, frame, labels)
