"""Exports a trained masked LM as a keras-hub preset and/or a Hugging Face transformers folder.

    python -m trainer.export --checkpoint runs/tiny --output_dir exports/tiny --format all

`--checkpoint` is anything `trainer.checkpoints.resolve` accepts (training output dir, one
`.weights.h5`, or a preset we exported). With one format the files go into `--output_dir`;
with `all`, into `{output_dir}/keras-hub/` and `{output_dir}/hf/` (both formats have a
`config.json`, so they cannot share a folder).

- keras-hub: `save_to_preset` + our `run_config.json` + `tokenizer/`;
  `keras_hub.models.MaskedLM.from_preset(dir)` loads it (no keras-hub preprocessor: our
  tokenizers are `tokenizers` JSON, which keras-hub tokenizers cannot read).
- hf: `config.json`, `model.safetensors` and the tokenizer files, for
  `AutoModelForMaskedLM.from_pretrained(dir)` and `pipeline("fill-mask", model=dir)` in PyTorch.

keras-hub cannot export RoBERTa/BERT to transformers, so the weight-name mapping below is ours.

Example:
    >>> paths = export("runs/tiny", "exports/tiny", "all")
    >>> paths
    {'keras-hub': 'exports/tiny/keras-hub', 'hf': 'exports/tiny/hf'}
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from common import fs, tokenizer_files  # noqa: E402
from trainer import checkpoints  # noqa: E402

KERAS_HUB, HF = "keras-hub", "hf"
FORMATS = (KERAS_HUB, HF, "all")
HF_WEIGHTS = "model.safetensors"
HF_CONFIG = "config.json"


class ExportError(ValueError):
    """The model cannot be exported as asked; the message is one sentence for the user."""


@dataclasses.dataclass(frozen=True)
class _Context:
    """What some transforms need besides the weight itself."""

    pad_id: int
    hidden_dim: int


# Transforms from a keras-hub variable to a torch parameter.
def _copy(w, ctx):
    return w


def _transpose(w, ctx):  # Keras Dense kernel (in, out) -> torch Linear weight (out, in).
    return w.T


def _heads_in_kernel(w, ctx):  # EinsumDense (hidden, heads, head_dim) -> (heads*head_dim, hidden)
    return w.reshape(w.shape[0], -1).T


def _heads_bias(w, ctx):  # (heads, head_dim) -> (heads*head_dim,)
    return w.reshape(-1)


def _heads_out_kernel(w, ctx):  # EinsumDense (heads, head_dim, hidden) -> (hidden, heads*head_dim)
    return w.reshape(-1, w.shape[-1]).T


def _roberta_positions(w, ctx):
    # HF RoBERTa numbers positions from pad_id + 1 (pad tokens get position pad_id), so its
    # table has pad_id + 1 leading rows that keras-hub's table does not have.
    return np.concatenate([np.zeros((ctx.pad_id + 1, w.shape[1]), w.dtype), w])


def _zero_token_type(w, ctx):
    # HF RoBERTa adds token_type_embeddings[0] to every token; keras-hub RoBERTa has none.
    return np.zeros((1, ctx.hidden_dim), np.float32)


# One row per weight: (keras-hub variable path, transformers parameter name, transform).
# `{i}` is the layer index, `{m}` the HF base model prefix. A None keras path means the HF
# weight has no keras-hub counterpart; a None HF name means the variable is not exported.
# The LM decoder weight and bias are tied in HF (to word embeddings and the head bias).
_ENCODER_LAYER = [
    ("transformer_layer_{i}/self_attention_layer/query/kernel",
     "{m}.encoder.layer.{i}.attention.self.query.weight", _heads_in_kernel),
    ("transformer_layer_{i}/self_attention_layer/query/bias",
     "{m}.encoder.layer.{i}.attention.self.query.bias", _heads_bias),
    ("transformer_layer_{i}/self_attention_layer/key/kernel",
     "{m}.encoder.layer.{i}.attention.self.key.weight", _heads_in_kernel),
    ("transformer_layer_{i}/self_attention_layer/key/bias",
     "{m}.encoder.layer.{i}.attention.self.key.bias", _heads_bias),
    ("transformer_layer_{i}/self_attention_layer/value/kernel",
     "{m}.encoder.layer.{i}.attention.self.value.weight", _heads_in_kernel),
    ("transformer_layer_{i}/self_attention_layer/value/bias",
     "{m}.encoder.layer.{i}.attention.self.value.bias", _heads_bias),
    ("transformer_layer_{i}/self_attention_layer/attention_output/kernel",
     "{m}.encoder.layer.{i}.attention.output.dense.weight", _heads_out_kernel),
    ("transformer_layer_{i}/self_attention_layer/attention_output/bias",
     "{m}.encoder.layer.{i}.attention.output.dense.bias", _copy),
    ("transformer_layer_{i}/self_attention_layer_norm/gamma",
     "{m}.encoder.layer.{i}.attention.output.LayerNorm.weight", _copy),
    ("transformer_layer_{i}/self_attention_layer_norm/beta",
     "{m}.encoder.layer.{i}.attention.output.LayerNorm.bias", _copy),
    ("transformer_layer_{i}/feedforward_intermediate_dense/kernel",
     "{m}.encoder.layer.{i}.intermediate.dense.weight", _transpose),
    ("transformer_layer_{i}/feedforward_intermediate_dense/bias",
     "{m}.encoder.layer.{i}.intermediate.dense.bias", _copy),
    ("transformer_layer_{i}/feedforward_output_dense/kernel",
     "{m}.encoder.layer.{i}.output.dense.weight", _transpose),
    ("transformer_layer_{i}/feedforward_output_dense/bias",
     "{m}.encoder.layer.{i}.output.dense.bias", _copy),
    ("transformer_layer_{i}/feedforward_layer_norm/gamma",
     "{m}.encoder.layer.{i}.output.LayerNorm.weight", _copy),
    ("transformer_layer_{i}/feedforward_layer_norm/beta",
     "{m}.encoder.layer.{i}.output.LayerNorm.bias", _copy),
]

_ROBERTA = [
    ("embeddings/token_embedding/embeddings", "roberta.embeddings.word_embeddings.weight", _copy),
    ("embeddings/position_embedding/embeddings", "roberta.embeddings.position_embeddings.weight",
     _roberta_positions),
    (None, "roberta.embeddings.token_type_embeddings.weight", _zero_token_type),
    ("embeddings_layer_norm/gamma", "roberta.embeddings.LayerNorm.weight", _copy),
    ("embeddings_layer_norm/beta", "roberta.embeddings.LayerNorm.bias", _copy),
    ("mlm_head/intermediate_dense/kernel", "lm_head.dense.weight", _transpose),
    ("mlm_head/intermediate_dense/bias", "lm_head.dense.bias", _copy),
    ("mlm_head/intermediate_layer_norm/gamma", "lm_head.layer_norm.weight", _copy),
    ("mlm_head/intermediate_layer_norm/beta", "lm_head.layer_norm.bias", _copy),
    ("mlm_head/output_bias", "lm_head.bias", _copy),
]

_BERT = [
    ("token_embedding/embeddings", "bert.embeddings.word_embeddings.weight", _copy),
    ("position_embedding/embeddings", "bert.embeddings.position_embeddings.weight", _copy),
    ("segment_embedding/embeddings", "bert.embeddings.token_type_embeddings.weight", _copy),
    ("embeddings_layer_norm/gamma", "bert.embeddings.LayerNorm.weight", _copy),
    ("embeddings_layer_norm/beta", "bert.embeddings.LayerNorm.bias", _copy),
    # BertForMaskedLM has no pooler (and the MLM loss never trains keras-hub's).
    ("pooled_dense/kernel", None, None),
    ("pooled_dense/bias", None, None),
    ("mlm_head/intermediate_dense/kernel", "cls.predictions.transform.dense.weight", _transpose),
    ("mlm_head/intermediate_dense/bias", "cls.predictions.transform.dense.bias", _copy),
    ("mlm_head/intermediate_layer_norm/gamma", "cls.predictions.transform.LayerNorm.weight",
     _copy),
    ("mlm_head/intermediate_layer_norm/beta", "cls.predictions.transform.LayerNorm.bias", _copy),
    ("mlm_head/output_bias", "cls.predictions.bias", _copy),
]

WEIGHT_TABLES = {"roberta": (_ROBERTA, "roberta"), "bert": (_BERT, "bert")}


def weight_table(family: str, num_layers: int) -> list[tuple]:
    """The mapping rows of one model, with layer indices and prefixes filled in.

    Example:
        >>> weight_table("bert", 2)[5]
        ('pooled_dense/kernel', None, None)
    """
    rows, prefix = WEIGHT_TABLES[family]
    layers = [(k.format(i=i), h.format(i=i, m=prefix), t)
              for i in range(num_layers) for k, h, t in _ENCODER_LAYER]
    return rows + layers


def hf_state_dict(masked_lm, family: str, pad_id: int) -> dict[str, np.ndarray]:
    """transformers parameter name -> float32 array, for every weight of `masked_lm`.

    Raises ExportError if the model has a variable that the table does not list, or the
    reverse (e.g. another keras-hub version renamed one): nothing is silently left out.
    """
    backbone = masked_lm.backbone
    variables = {v.path: v for v in masked_lm.weights}
    table = weight_table(family, backbone.num_layers)
    listed = {k for k, _, _ in table if k is not None}
    if listed != set(variables):
        raise ExportError(
            f"the {family} weight table does not match the model: unlisted variables "
            f"{sorted(set(variables) - listed)}, missing variables {sorted(listed - set(variables))}."
        )
    ctx = _Context(pad_id=pad_id, hidden_dim=backbone.hidden_dim)
    tensors = {}
    for keras_path, hf_name, transform in table:
        if hf_name is None:
            continue
        value = None if keras_path is None else np.asarray(variables[keras_path].numpy())
        tensors[hf_name] = np.ascontiguousarray(transform(value, ctx), dtype=np.float32)
    return tensors


def hf_config(family: str, backbone_config: dict, tokenizer_info):
    """The transformers config (RobertaConfig / BertConfig) of a keras-hub backbone config."""
    from transformers import BertConfig, RobertaConfig

    ids = tokenizer_info.special_token_ids
    common = dict(
        vocab_size=backbone_config["vocabulary_size"],
        hidden_size=backbone_config["hidden_dim"],
        num_hidden_layers=backbone_config["num_layers"],
        num_attention_heads=backbone_config["num_heads"],
        intermediate_size=backbone_config["intermediate_dim"],
        hidden_dropout_prob=backbone_config.get("dropout", 0.1),
        attention_probs_dropout_prob=backbone_config.get("dropout", 0.1),
        pad_token_id=ids["pad_token"],
        bos_token_id=ids["cls_token"],
        eos_token_id=ids["sep_token"],
        tie_word_embeddings=True,
    )
    max_length = backbone_config["max_sequence_length"]
    if family == "roberta":
        return RobertaConfig(
            **common, hidden_act="gelu", layer_norm_eps=1e-5, type_vocab_size=1,
            max_position_embeddings=max_length + ids["pad_token"] + 1,
            architectures=["RobertaForMaskedLM"])
    # keras-hub BERT layers use the tanh GELU; its MLM head uses the exact GELU and
    # epsilon 1e-5, which one HF config cannot express: the head is approximate (tested).
    return BertConfig(
        **common, hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-12,
        type_vocab_size=backbone_config.get("num_segments", 2),
        max_position_embeddings=max_length, architectures=["BertForMaskedLM"])


def hf_tokenizer_config(tokenizer_dir: str, max_sequence_length: int) -> dict:
    """The tokenizer's `tokenizer_config.json`, capped at what the model's positions allow.

    A larger `model_max_length` would let `pipeline("fill-mask")` pass over-long inputs,
    which then fail inside the position embedding lookup.
    """
    config = fs.read_json(fs.join(tokenizer_dir, tokenizer_files.TOKENIZER_CONFIG))
    config["model_max_length"] = min(config.get("model_max_length", max_sequence_length),
                                     max_sequence_length)
    return config


def write_tokenizer(tokenizer_dir: str, target_dir: str, max_sequence_length: int) -> None:
    """Copies the tokenizer folder files, with `model_max_length` capped (see above)."""
    for name in (tokenizer_files.TOKENIZER_JSON, tokenizer_files.SPECIAL_TOKENS_MAP):
        fs.write_bytes(fs.join(target_dir, name), fs.read_bytes(fs.join(tokenizer_dir, name)))
    fs.write_json(fs.join(target_dir, tokenizer_files.TOKENIZER_CONFIG),
                  hf_tokenizer_config(tokenizer_dir, max_sequence_length))


def export_hf(masked_lm, source, tokenizer_info, output_dir: str) -> str:
    """Writes config.json, model.safetensors (no pickle) and the tokenizer files."""
    from safetensors.numpy import save

    config = hf_config(source.family, source.run_config["backbone_config"], tokenizer_info)
    tensors = hf_state_dict(masked_lm, source.family, tokenizer_info.pad_id)
    # transformers refuses safetensors files whose metadata does not name a framework.
    fs.write_bytes(fs.join(output_dir, HF_WEIGHTS), save(tensors, metadata={"format": "pt"}))
    fs.write_bytes(fs.join(output_dir, HF_CONFIG), config.to_json_string().encode("utf-8"))
    write_tokenizer(source.tokenizer_dir, output_dir, source.max_sequence_length)
    return output_dir


def export_keras_hub(masked_lm, source, output_dir: str) -> str:
    """`save_to_preset`, plus our run_config.json and tokenizer/ for `trainer.predict`."""
    if fs.is_remote(output_dir):  # keras-hub writes local files: stage, then copy
        with tempfile.TemporaryDirectory() as tmp:
            masked_lm.save_to_preset(tmp)
            for name in sorted(os.listdir(tmp)):
                with open(os.path.join(tmp, name), "rb") as f:
                    fs.write_bytes(fs.join(output_dir, name), f.read())
    else:
        masked_lm.save_to_preset(output_dir)
    run_config = {**source.run_config, "exported_from": source.path}
    fs.write_json(fs.join(output_dir, checkpoints.RUN_CONFIG), run_config)
    write_tokenizer(source.tokenizer_dir, fs.join(output_dir, checkpoints.TOKENIZER_DIR),
                    source.max_sequence_length)
    return output_dir


def _tokenizer_info(source):
    """The tokenizer's ids, checked against the ones the model was trained with."""
    if source.tokenizer_dir is None:
        raise ExportError(
            f"{source.path} has no {checkpoints.TOKENIZER_DIR}/ folder to export with it.")
    _, info = tokenizer_files.load(source.tokenizer_dir)
    trained = source.run_config.get("tokenizer", {}).get("fingerprint")
    if trained and trained != info.fingerprint:
        raise ExportError(
            f"{source.tokenizer_dir} is not the tokenizer the model was trained with "
            f"(fingerprint {info.fingerprint[:12]} != {trained[:12]}).")
    return info


def export(checkpoint: str, output_dir: str, fmt: str = "all") -> dict[str, str]:
    """Exports `checkpoint` in `fmt` (keras-hub, hf or all); returns {format: folder}."""
    if fmt not in FORMATS:
        raise ExportError(f"format {fmt!r} is not one of {FORMATS}.")
    source = checkpoints.resolve(checkpoint)
    info = _tokenizer_info(source)
    masked_lm = checkpoints.load_source(source)
    formats = (KERAS_HUB, HF) if fmt == "all" else (fmt,)
    out = {f: fs.join(output_dir, f) if fmt == "all" else output_dir for f in formats}
    if KERAS_HUB in out:
        export_keras_hub(masked_lm, source, out[KERAS_HUB])
    if HF in out:
        export_hf(masked_lm, source, info, out[HF])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True,
                        help="training output dir, a .weights.h5 checkpoint or a keras-hub preset")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--format", default="all", choices=FORMATS)
    args = parser.parse_args(argv)
    try:
        out = export(args.checkpoint, args.output_dir, args.format)
    except (checkpoints.ModelNotFoundError, ExportError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for fmt, path in out.items():
        print(f"{fmt}: {path}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # fewer TensorFlow start-up logs
    sys.exit(main())
