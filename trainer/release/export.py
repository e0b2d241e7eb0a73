"""Exports a trained masked LM as a keras-hub preset and/or a Hugging Face transformers folder,
or as a sentence-transformers model.

    python -m trainer.export --checkpoint runs/tiny --output_dir exports/tiny --format all

`--checkpoint` is anything `trainer.models.model_source.resolve` accepts (training output dir, one
`.weights.h5`, or a preset we exported). With one format the files go into `--output_dir`;
with `all`, into `{output_dir}/keras-hub/` and `{output_dir}/hf/` (both formats have a
`config.json`, so they cannot share a folder).

- keras-hub: `save_to_preset` + our `run_config.json` + `tokenizer/`;
  `keras_hub.models.MaskedLM.from_preset(dir)` loads it (no keras-hub preprocessor: our
  tokenizers are `tokenizers` JSON, which keras-hub tokenizers cannot read).
- hf: `config.json`, `model.safetensors` and the tokenizer files, for
  `AutoModelForMaskedLM.from_pretrained(dir)` and `pipeline("fill-mask", model=dir)` in PyTorch.
- sentence-transformers (not part of `all`): hf's files plus the modules that pool (`--pooling
  mean` or `cls`) and normalise, for `SentenceTransformer(dir)`
  (`trainer/release/sentence_transformers_export.py`); the vectors of
  `trainer/release/embeddings.py`.

keras-hub cannot export RoBERTa/BERT to transformers, so the weight-name mappings are ours: one
table per family in `trainer/families/`.

Every folder gets a model card (`README.md`, `trainer/release/model_card.py`) built from the run's
files; `--language` and `--license` fill in what the run cannot know. `--push_to
hf://ORG/NAME` (or `kaggle://OWNER/MODEL/keras/VARIATION`, preset only) then publishes the
folders with the libraries' own APIs (`trainer/release/push.py`; targets: `common/publish.py`).

Example:
    >>> paths = export("runs/tiny", "exports/tiny", "all")
    >>> paths
    {'keras-hub': 'exports/tiny/keras-hub', 'hf': 'exports/tiny/hf'}
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile

import numpy as np

from common import flags, folder_swap, fs, publish, tokenizer_files
from common.errors import UserError, run_cli
from trainer.families import activation, encoder_weights
from trainer.families.family import Family
from trainer.models import model_source
from trainer.models.pooling import CHOICES as POOLINGS
from trainer.release import card_facts, export_folder, model_card, push
from trainer.release import sentence_transformers_export as st_export
from trainer.run_folder import run_dir
from trainer.startup import keras_backend

KERAS_HUB, HF, ST = "keras-hub", "hf", st_export.FORMAT
FORMATS = (KERAS_HUB, HF, ST, "all")  # `all` is keras-hub and hf; ST only when named
HF_WEIGHTS = "model.safetensors"
HF_CONFIG = "config.json"
# The files that make a folder loadable: on an object store they are swapped in last
# (`folder_swap.whole_folder`); which folder is an earlier export is `export_folder`'s question.
ALL_MARKERS = (HF_CONFIG, st_export.MODULES, f"{KERAS_HUB}/{HF_CONFIG}", f"{HF}/{HF_CONFIG}")


class ExportError(UserError):
    """The model cannot be exported as asked; the message is one sentence for the user."""


def hf_state_dict(masked_lm, family: Family, pad_id: int) -> dict[str, np.ndarray]:
    """transformers parameter name -> float32 array, for every weight of `masked_lm`.

    Raises ExportError if the model has a variable that the table does not list, or the
    reverse (e.g. another keras-hub version renamed one): nothing is silently left out.
    """
    backbone = masked_lm.backbone
    variables = {v.path: v for v in masked_lm.weights}
    table = family.weight_table(backbone.num_layers)  # the rows, layer indices filled in
    listed = {k for k, _, _ in table if k is not None}
    if listed != set(variables):
        raise ExportError(
            f"the {family.name} weight table does not match the model: unlisted variables "
            f"{sorted(set(variables) - listed)}, missing variables "
            f"{sorted(listed - set(variables))}."
        )
    ctx = encoder_weights.Context(pad_id=pad_id, hidden_dim=backbone.hidden_dim)
    tensors = {}
    for keras_path, hf_name, transform in table:
        if hf_name is None:
            continue
        value = None if keras_path is None else np.asarray(variables[keras_path].numpy())
        tensors[hf_name] = np.ascontiguousarray(transform(value, ctx), dtype=np.float32)
    return tensors


def hf_config(family: Family, backbone_config: dict, tokenizer_info):
    """The transformers config (RobertaConfig / BertConfig) of a keras-hub backbone config."""
    return family.hf_config(backbone_config, tokenizer_info.special_token_ids)


def export_hf(masked_lm, source, tokenizer_info, output_dir: str) -> int:
    """Writes config.json, model.safetensors (no pickle) and the tokenizer files; returns the
    number of parameters model.safetensors holds (not the Keras model's: RoBERTa's position
    table has two more rows and a token-type row, BERT's pooler is not exported)."""
    from safetensors.numpy import save

    config = hf_config(source.family, source.record.backbone_config, tokenizer_info)
    tensors = hf_state_dict(masked_lm, source.family, tokenizer_info.pad_id)
    # transformers refuses safetensors files whose metadata does not name a framework.
    fs.write_bytes(fs.join(output_dir, HF_WEIGHTS), save(tensors, metadata={"format": "pt"}))
    fs.write_bytes(fs.join(output_dir, HF_CONFIG), config.to_json_string().encode("utf-8"))
    tokenizer_files.copy(source.tokenizer_dir, output_dir, source.max_sequence_length)
    return sum(int(t.size) for t in tensors.values())


def export_keras_hub(masked_lm, source, output_dir: str) -> str:
    """`save_to_preset`, plus our run_config.json and tokenizer/ for `trainer.predict`."""
    if fs.is_remote(output_dir):  # keras-hub writes local files: stage, then copy
        with tempfile.TemporaryDirectory() as tmp:
            _save_preset(masked_lm, tmp)
            for name in sorted(os.listdir(tmp)):
                with open(os.path.join(tmp, name), "rb") as f:
                    fs.write_bytes(fs.join(output_dir, name), f.read())
    else:
        os.makedirs(output_dir, exist_ok=True)
        _save_preset(masked_lm, output_dir)
    source.record.exported(source.path).write(fs.join(output_dir, run_dir.RUN_CONFIG))
    tokenizer_files.copy(
        source.tokenizer_dir, fs.join(output_dir, run_dir.TOKENIZER_DIR), source.max_sequence_length
    )
    return output_dir


# What h5py adds to the weights' own bytes (names, attributes, B-trees), with room to spare:
# a 1-layer RoBERTa's preset (25 variables, two .h5 files) took 78 KB over 186 KB of weights.
_HDF5_FILE_OVERHEAD, _HDF5_VARIABLE_OVERHEAD = 1 << 20, 4 << 10


def _save_preset(masked_lm, folder: str) -> None:
    """`save_to_preset`, once the disk is known to hold the weights: keras-hub writes them
    with h5py, which on a full disk raises again in its finaliser and kills the process
    with a segmentation fault at exit instead of letting it report one line."""
    need = _HDF5_FILE_OVERHEAD + sum(
        int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize + _HDF5_VARIABLE_OVERHEAD
        for v in masked_lm.weights
    )
    free = shutil.disk_usage(folder).free
    if free < need:
        raise ExportError(
            f"cannot write the keras-hub preset in {fs.unstaged(folder)}: it "
            f"needs about {need / 2**20:,.1f} MiB and {free / 2**20:,.1f} MiB "
            "are free; the previous export (if any) is kept."
        )
    masked_lm.save_to_preset(folder)


def _tokenizer_info(source):
    """(tokenizer, its ids), checked against the tokenizer the model was trained with."""
    if source.tokenizer_dir is None:
        raise ExportError(
            f"{source.path} has no {run_dir.TOKENIZER_DIR}/ folder to export with it."
        )
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    trained = source.record.tokenizer.get("fingerprint")
    if trained and trained != info.fingerprint:
        raise ExportError(
            f"{source.tokenizer_dir} is not the tokenizer the model was trained with "
            f"(fingerprint {info.fingerprint[:12]} != {trained[:12]})."
        )
    return tokenizer, info


def _check_preset_computes(source) -> None:
    """A keras-hub preset is rebuilt from keras-hub's own backbone config, which has no
    activation: a model whose encoder activation is not keras-hub's (BERT with the exact
    GELU, from --init_from) would load computing other outputs, so that format is refused."""
    family = source.family
    name = activation.of(source.record.backbone_config, family.activation)
    if name != family.activation:
        raise ExportError(
            f"{source.path} uses the {name} activation where keras-hub's "
            f"{family.backbone_class} rebuilds {family.activation}: a keras-hub preset would "
            "compute other outputs; export it with --format hf."
        )


def formats_of(fmt: str) -> tuple:
    if fmt not in FORMATS:
        raise ExportError(f"format {fmt!r} is not one of {FORMATS}.")
    return (KERAS_HUB, HF) if fmt == "all" else (fmt,)


def export(
    checkpoint: str,
    output_dir: str,
    fmt: str = "all",
    card: model_card.CardOptions | None = None,
    pooling: str = "mean",
) -> dict[str, str]:
    """Exports `checkpoint` in `fmt` (keras-hub, hf, sentence-transformers or all), each
    folder with its model card; returns {format: folder}. `pooling` (cls or mean) is the
    sentence-transformers model's.

    `output_dir` is written whole or not at all (`folder_swap.whole_folder`): staged beside it,
    then swapped in, so a failure (a full disk, a kill) leaves no partial export there and
    an earlier export in its place stays loadable; a folder holding anything else is
    refused before the model is loaded (`export_folder`: an earlier export is recognised by
    its card, and holds nothing an export never writes)."""
    formats = formats_of(fmt)
    export_folder.check_replaceable(output_dir)  # before the model is loaded: one line
    source = model_source.resolve(checkpoint)
    if KERAS_HUB in formats:
        _check_preset_computes(source)
    tokenizer, info = _tokenizer_info(source)
    if ST in formats:  # a tokenizer that would feed other ids: refused before the model loads
        st_export.check_framing(source.tokenizer_dir, info, source.max_sequence_length)
    card = dataclasses.replace(card or model_card.CardOptions(), pooling=pooling)
    with folder_swap.whole_folder(output_dir, markers=ALL_MARKERS) as stage:
        masked_lm = model_source.load_source(source)
        staged = {f: fs.join(stage, f) if fmt == "all" else stage for f in formats}
        parameters = {KERAS_HUB: masked_lm.count_params()}  # each card counts its own folder's
        if KERAS_HUB in staged:
            export_keras_hub(masked_lm, source, staged[KERAS_HUB])
        if HF in staged:
            parameters[HF] = export_hf(masked_lm, source, info, staged[HF])
        if ST in staged:
            parameters[ST] = export_hf(masked_lm, source, info, staged[ST])
            st_export.write(staged[ST], source, info, pooling)
        facts = card_facts.gather(source, tokenizer, parameters[KERAS_HUB])
        for f, folder in staged.items():
            own = dataclasses.replace(facts, parameters=parameters[f])
            model_card.write(model_card.build(own, f, card), folder)
    return {f: fs.join(output_dir, f) if fmt == "all" else output_dir for f in formats}


def export_and_push(
    checkpoint: str, output_dir: str, fmt: str, push_flags: publish.PushFlags, pooling=None
) -> tuple[dict, dict]:
    """`export`, then `--push_to` (checked, credentials too, before anything is written);
    returns ({format: folder}, {format: where it was pushed}). `pooling` is --pooling, which
    only the sentence-transformers format takes (None: mean)."""
    if pooling is not None and ST not in formats_of(fmt):
        raise ExportError(f"--pooling is for --format {ST}, not {fmt}.")
    repos, target = {}, push_flags.push_target
    if target:
        repos = publish.repos_for(target, formats_of(fmt))
        push.check_credentials(target)
    card = model_card.CardOptions(
        push_flags.language, push_flags.license, {f: t.uri for f, t in repos.items()}
    )
    paths = export(checkpoint, output_dir, fmt, card, pooling or "mean")
    return paths, push.push_export(paths, repos)


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkpoint",
        required=True,
        help="training output dir, a .weights.h5 checkpoint or a keras-hub preset",
    )
    parser.add_argument("--output_dir", required=True)
    parser.add_argument(
        "--format",
        default="all",
        choices=FORMATS,
        help=f"all: {KERAS_HUB} and {HF} (in subfolders); {ST} only when named",
    )
    parser.add_argument(
        "--pooling",
        choices=POOLINGS,
        help=f"--format {ST}: the sentence vector, the mean of the tokens or the first "
        "token's final hidden state, L2-normalised (default mean)",
    )
    flags.add_flags(parser, publish.PushFlags)
    args = parser.parse_args(argv)

    def body():
        keras_backend.check()
        push_flags = publish.PushFlags(args.push_to, args.language, args.license)
        paths, pushed = export_and_push(
            args.checkpoint, args.output_dir, args.format, push_flags, args.pooling
        )
        for fmt, path in paths.items():
            note = (
                f" (pushed to {pushed[fmt]})"
                if fmt in pushed
                else " (not pushed: Kaggle takes the keras-hub preset)"
                if args.push_to
                else ""
            )
            print(f"{fmt}: {path}{note}")

    return run_cli(body, argv)
