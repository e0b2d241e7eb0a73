"""`--init_from MODEL`: continued (domain-adaptive) pretraining from an existing model.

MODEL is any of:

- a Hugging Face transformers folder (`config.json` + `model.safetensors`, or the shards its
  `model.safetensors.index.json` names; e.g. our own `hf`
  export or `save_pretrained` of a RobertaForMaskedLM / BertForMaskedLM), or a Hub id such as
  `FacebookAI/roberta-base` when the network allows (downloaded with huggingface_hub);
- a keras-hub preset we exported (`export/keras-hub`; an `--format all` export folder is read
  through its `keras-hub/` folder), one of our run folders or one `.weights.h5` checkpoint
  (whatever `trainer.models.model_source.resolve` accepts).

The family, sizes and positions come from the checkpoint. A transformers checkpoint is read
through the family's weight table (`trainer/families/`), the one the export writes with, row
by row backwards (`transform.inverse`): every tensor must be one the table names, and the
config must be one our keras-hub model computes exactly (else one line naming what differs),
so nothing is ever loaded in part. What the data must agree on with the model (its tokenizer,
its positions) is `trainer.models.starting_point`'s.

Example:
    >>> initial = resolve("exports/tiny/hf")
    >>> initial.family.name, initial.backbone_config["max_sequence_length"]
    ('roberta', 128)
    >>> load_into(masked_lm, initial)      # a MaskedLM built from initial.backbone_config
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
import os
import re

import numpy as np

from common import fs, tokenizer_files
from trainer import families
from trainer.families import activation, encoder_weights
from trainer.families.family import Family
from trainer.models import keras_hub_presets, model, model_source, safetensors_files
from trainer.models.starting_point import InitFromError, Initial
from trainer.run_folder.run_dir import RUN_CONFIG

HF_CONFIG, HF_WEIGHTS = "config.json", safetensors_files.SINGLE
# What a config that leaves a computed field (`Family.hf_computed`) out means by it.
_DEFAULTS = {
    "position_embedding_type": "absolute",
    "is_decoder": False,
    "add_cross_attention": False,
    "tie_word_embeddings": True,
}
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def resolve(path: str) -> Initial:
    path = path.rstrip("/")
    if path.startswith(keras_hub_presets.KAGGLE) or (
        not fs.exists(path) and keras_hub_presets.handle_of(path)
    ):  # a keras-hub preset name: downloaded (or found in the cache) by kagglehub
        folder, version = keras_hub_presets.download(path)
        return dataclasses.replace(_resolve(folder), hub_id=path, revision=version)
    if not fs.is_remote(path) and not fs.exists(path) and _HUB_ID.fullmatch(path):
        folder = _download(path)
        return dataclasses.replace(_resolve(folder), hub_id=path, revision=_commit_of(folder))
    return _resolve(path)


def _commit_of(snapshot: str) -> str | None:
    """huggingface_hub's cache keeps a download in models--ORG--NAME/snapshots/COMMIT/ (the
    branch resolved to its commit, online by the Hub, offline by refs/main)."""
    parent, name = os.path.split(os.path.normpath(snapshot))
    if os.path.basename(parent) == "snapshots" and _COMMIT.fullmatch(name):
        return name
    return None


def _resolve(path: str) -> Initial:
    if fs.exists(fs.join(path, "keras-hub", HF_CONFIG)):  # an `--format all` export
        path = fs.join(path, "keras-hub")
    if path.endswith(model_source.WEIGHTS_SUFFIX) or not fs.exists(fs.join(path, HF_CONFIG)):
        return _ours(path)
    config = _read_config(path)
    if "model_type" not in config:  # a keras-hub preset
        return _ours(path)
    return _transformers(path, config)


def _download(repo_id: str) -> str:
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(
            repo_id,
            allow_patterns=[
                HF_CONFIG,
                HF_WEIGHTS,
                safetensors_files.INDEX,
                safetensors_files.SHARD_PATTERN,
                tokenizer_files.TOKENIZER_JSON,
                tokenizer_files.TOKENIZER_CONFIG,
                tokenizer_files.SPECIAL_TOKENS_MAP,
            ],
        )
    except Exception as err:  # offline, unknown repo, no access: all one line
        raise InitFromError(
            f"--init_from {repo_id}: no such folder here, and the Hugging Face "
            f"Hub download failed ({str(err).splitlines()[0][:160]})."
        ) from None


def _read_config(path: str) -> dict:
    try:
        return fs.read_json(fs.join(path, HF_CONFIG))
    except ValueError as err:
        raise InitFromError(f"{fs.join(path, HF_CONFIG)} is not valid JSON: {err}") from None


def _ours(path: str) -> Initial:
    if fs.exists(fs.join(path, HF_CONFIG)) and not fs.exists(fs.join(path, RUN_CONFIG)):
        _check_masked_lm_preset(path)  # a preset another trainer (or keras-hub) wrote
    try:
        source = model_source.resolve(path)
    except model_source.ModelNotFoundError as err:
        raise InitFromError(f"--init_from: {err}") from None
    info = None
    if source.tokenizer_dir is not None and fs.exists(
        fs.join(source.tokenizer_dir, tokenizer_files.TOKENIZER_JSON)
    ):
        info = tokenizer_files.load(source.tokenizer_dir)[1]
    elif source.kind == "preset":  # keras-hub's tokenizer assets, read as `tokenizers`
        info = keras_hub_presets.info_of(source.path)
    pad = source.record.tokenizer.get("special_token_ids", {}).get("pad_token")
    if pad is None and info is not None:
        pad = info.pad_id
    files = (
        [source.path]
        if source.kind == "checkpoint"
        else [fs.join(source.path, HF_CONFIG)] + fs.glob_in(source.path, "*.weights.h5")
    )
    return Initial(
        source.kind,
        source.path,
        source.family,
        dict(source.record.backbone_config),
        info,
        pad,
        _digest(files),
    )


def _check_masked_lm_preset(path: str) -> None:
    """keras-hub builds a MaskedLM from any preset, with a random head where the preset has
    none: keras-hub's own presets (roberta_base_en, bert_base_en_uncased) are backbones
    converted without their MLM head. That would be a partial load: refused."""
    family = families.of_registered_name(
        fs.read_json(fs.join(path, HF_CONFIG)).get("registered_name")
    )
    if family is None:
        return  # not a RoBERTa/BERT preset: model_source says so
    task_path = fs.join(path, model_source.PRESET_TASK)
    task = fs.read_json(task_path) if fs.exists(task_path) else {}
    if task.get("registered_name") != family.task_registered_name() or not fs.exists(
        fs.join(path, "task.weights.h5")
    ):
        raise InitFromError(
            f"{path} holds a {family.backbone_class} without a masked-LM head (task "
            f"{task.get('class_name')}; keras-hub's own presets are backbones only): start "
            "from the transformers checkpoint it was converted from instead, e.g. "
            f"--init_from {family.hub_checkpoint}."
        )


def _transformers(path: str, config: dict) -> Initial:
    model_type = config.get("model_type")
    if model_type not in families.NAMES:
        raise InitFromError(
            f"{path} holds a {model_type!r} model; --init_from takes "
            f"{' or '.join(families.NAMES)} masked LMs."
        )
    family = families.get(model_type)  # a name enters: the checkpoint's model_type
    for key in (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
        "pad_token_id",
    ):
        if not isinstance(config.get(key), int):
            raise InitFromError(f"{fs.join(path, HF_CONFIG)} has no integer {key}.")
    try:  # within the bounds of --config: a released model trains only what a flag could set
        backbone = model.converted_backbone(family, config, fs.join(path, HF_CONFIG))
    except ValueError as err:
        raise InitFromError(str(err)) from None
    _check_config(path, family, config, backbone)
    weights = safetensors_files.checkpoint_files(path)
    if weights is None:
        raise InitFromError(
            f"{path} has no {HF_WEIGHTS} nor {safetensors_files.INDEX} (only safetensors "
            "weights are read: a pickle file can run code)."
        )
    _check_names(path, family, safetensors_files.dtypes(weights), backbone["num_layers"])
    return Initial(
        "hf",
        path,
        family,
        backbone,
        _shipped_tokenizer(path),
        config["pad_token_id"],
        _digest([fs.join(path, HF_CONFIG), *weights]),
    )


def _shipped_tokenizer(path: str):
    """The checkpoint's tokenizer, if it ships one we can read whole. Some Hub repos
    (roberta-base) have tokenizer.json but no tokenizer_config.json naming the special
    tokens: then only the vocabulary size and pad id can be checked against the data."""
    if not fs.exists(fs.join(path, tokenizer_files.TOKENIZER_JSON)):
        return None
    try:
        return tokenizer_files.load(path)[1]
    except tokenizer_files.TokenizerFilesError as err:
        print(
            f"note: the checkpoint's tokenizer is not checked against the data's beyond "
            f"its size and pad id: {err}"
        )
        return None


def _check_config(path: str, family, config: dict, backbone: dict) -> None:
    """Refuses a config whose computation our model does not reproduce, naming the field."""
    ids = {
        "pad_token": config["pad_token_id"],
        "cls_token": config.get("bos_token_id"),
        "sep_token": config.get("eos_token_id"),
    }
    ours = family.hf_config(backbone, ids)
    try:
        theirs = type(ours).from_dict(config)
    except (TypeError, ValueError) as err:
        raise InitFromError(f"{fs.join(path, HF_CONFIG)}: {str(err).splitlines()[0]}") from None
    for key in family.hf_computed:  # the fields that change what the family's model computes
        want, have = (getattr(c, key, _DEFAULTS.get(key)) for c in (ours, theirs))
        same = activation.same_in_hf if key == "hidden_act" else operator.eq
        if not same(want, have):
            raise InitFromError(
                f"{path}: {key} is {have!r}, but keras-hub's {family.backbone_class} computes "
                f"{want!r}; this checkpoint cannot be continued without changing its outputs."
            )
    positions = family.max_positions(backbone)  # whole heads: converted_backbone checked them
    if positions is not None and positions < 1:
        have = config["max_position_embeddings"]
        raise InitFromError(f"{path}: max_position_embeddings {have} leaves no position.")


def _check_names(path: str, family: Family, names: dict, num_layers: int) -> None:
    # the table the export writes with, filled in per layer
    table = {h for _, h, _ in family.weight_table(num_layers) if h is not None}
    buffers = {n for n in names if n.endswith(".position_ids")}  # integer ranges, not weights
    skipped = sorted(n for n in names if n.startswith(family.not_mlm))
    if skipped:
        print(
            f"note: {path}: not loading {', '.join(skipped)} (not part of a masked LM; "
            f"transformers' {family.name} masked LM does not load them either)"
        )
    unknown = sorted(set(names) - table - set(family.tied) - buffers - set(skipped))
    missing = sorted(table - set(names))
    if unknown:
        raise InitFromError(
            f"{path} holds weights that the {family.name} masked LM has no place "
            f"for: {', '.join(unknown[:3])}{' ...' if len(unknown) > 3 else ''}"
            "; loading the rest would be a partial load."
        )
    if missing:
        raise InitFromError(
            f"{path} lacks {', '.join(missing[:3])}"
            f"{' ...' if len(missing) > 3 else ''} (a model without the MLM "
            "head, or another layer count than config.json says)."
        )
    odd = sorted(n for n in table if names[n] not in ("F32", "F16", "BF16"))
    if odd:
        raise InitFromError(f"{path}: {odd[0]} is {names[odd[0]]}, not a float tensor.")


def load_into(masked_lm, initial: Initial) -> None:
    """Sets every weight of `masked_lm` (built from `initial.backbone_config`) from the
    checkpoint; a variable that the checkpoint does not set keeps its value (BERT's pooler,
    which BertForMaskedLM does not have and the MLM loss never trains)."""
    if initial.kind == "hf":
        values = _from_transformers(masked_lm, initial)
    else:
        source = model_source.load_source(model_source.resolve(initial.path))
        values = {v.path: np.asarray(v.numpy()) for v in source.weights}
    variables = {v.path: v for v in masked_lm.weights}
    if not set(values) <= set(variables):
        raise InitFromError(
            f"{initial.path}: variables {sorted(set(values) - set(variables))[:3]}"
            " are not in the model built from its own config."
        )
    for path, value in values.items():
        if tuple(value.shape) != tuple(variables[path].shape):
            raise InitFromError(
                f"{initial.path}: {path} has shape {tuple(value.shape)}, the "
                f"model {tuple(variables[path].shape)}."
            )
        variables[path].assign(value.astype(variables[path].dtype))


def _from_transformers(masked_lm, initial: Initial) -> dict[str, np.ndarray]:
    """keras-hub variable path -> value: the export's table read backwards."""
    family = initial.family
    tensors = safetensors_files.read_floats(safetensors_files.checkpoint_files(initial.path))
    for copy, original in family.tied.items():
        if copy in tensors and not np.array_equal(tensors[copy], tensors[original]):
            raise InitFromError(
                f"{initial.path}: {copy} differs from {original}; keras-hub "
                "ties the LM decoder to it (untied decoders are not supported)."
            )
    shapes = {v.path: tuple(v.shape) for v in masked_lm.weights}
    values = {}
    for keras_path, hf_name, transform in family.weight_table(
        initial.backbone_config["num_layers"]
    ):
        if keras_path is None or hf_name is None:
            continue  # a tensor folded into another (RoBERTa's token type), or not exported
        ctx = encoder_weights.Context(
            pad_id=initial.pad_id,
            hidden_dim=masked_lm.backbone.hidden_dim,
            hf=tensors,
            shape=shapes[keras_path],
        )
        values[keras_path] = transform.inverse(tensors[hf_name], ctx)
    return values


def _digest(files) -> str:
    sha = hashlib.sha256()
    for name in files:
        sha.update(fs.read_bytes(name))
    return sha.hexdigest()
