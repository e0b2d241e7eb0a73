"""The files that make a transformers export a sentence-transformers model: what
`SentenceTransformer(path)` loads with no code of ours, so that MTEB and the serving tools read
our vectors as those of any embedding model (and do not guess a pooling: a bare masked LM loads
with sentence-transformers' "creating a new one with mean pooling").

Beside the transformers folder (`config.json`, `model.safetensors`, the tokenizer files, which
`trainer.release.export.export_hf` writes; sentence-transformers' `Transformer` module loads
the encoder from them with `AutoModel`, leaving the masked-LM head unread):

- `modules.json`: the three modules in order, Transformer at the root, Pooling in `1_Pooling/`,
  Normalize in `2_Normalize/`, by the class names every version since 2.2 resolves
  (`sentence_transformers.models.*`; 6.x keeps them as aliases);
- `1_Pooling/config.json`: `word_embedding_dimension` and the `pooling_mode_*` switches, one on
  (`mean` or `cls`), the keys every version reads (6.x converts them to its `pooling_mode`);
- `2_Normalize/config.json`: what 6.x's Normalize writes (earlier versions ignore the file);
- `sentence_bert_config.json`: `max_seq_length` (the model's length), `do_lower_case` false;
- `config_sentence_transformers.json`: `model_type`, the similarity (`cosine`: the vectors are
  unit length) and the versions the format was checked with.

The tokenizer frames a text as `trainer.release.embeddings` does: its post-processor adds the
start and end tokens (checked here, refused in one line otherwise), and its
`tokenizer_config.json` says `split_special_tokens`, so a text quoting `<s>` or `[CLS]` is read
as characters, as our tokenizer reads text (`tokenizer_files.text_only`). Formats checked
against sentence-transformers 6.3.0's `base/model.py` (`save`, `_load_config_modules`),
`base/modules/transformer.py`, `sentence_transformer/modules/pooling.py` and
`base/modules/normalize.py`; the tests load the export and compare its vectors with ours.

Example:
    >>> write(stage, source, info, "mean")
    >>> fs.read_json(fs.join(stage, POOLING_CONFIG))["pooling_mode_mean_tokens"]
    True
"""

from __future__ import annotations

from common import fs, tokenizer_files
from common.errors import UserError
from trainer.models import pooling
from trainer.release import embeddings

FORMAT = "sentence-transformers"
MODULES = "modules.json"
POOLING_DIR, NORMALIZE_DIR = "1_Pooling", "2_Normalize"
POOLING_CONFIG = f"{POOLING_DIR}/config.json"
NORMALIZE_CONFIG = f"{NORMALIZE_DIR}/config.json"
SBERT_CONFIG = "sentence_bert_config.json"
ST_CONFIG = "config_sentence_transformers.json"
FILES = (MODULES, POOLING_CONFIG, NORMALIZE_CONFIG, SBERT_CONFIG, ST_CONFIG)  # beside hf's
# The sentence-transformers version these files were checked with (the test extra's pin).
CHECKED_WITH = "6.3.0"
SIMILARITY = "cosine"
# Pooling.py's switches (sentence-transformers 2.2 to 5.x write all six); `mean`/`cls` set one.
_SWITCHES = {
    "cls": "pooling_mode_cls_token",
    "mean": "pooling_mode_mean_tokens",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
    "weightedmean": "pooling_mode_weightedmean_tokens",
    "lasttoken": "pooling_mode_lasttoken",
}
# 6.x's Normalize: it normalises the pooled vector in place.
NORMALIZE = {"module_input_name": "sentence_embedding", "module_output_name": "sentence_embedding"}
_PROBE = "A probe, with 2 words <s> [CLS]."  # quoting control tokens: they must stay text


class SentenceTransformersExportError(UserError):
    """The model cannot be written as a sentence-transformers model; one line for the user."""


def modules() -> list[dict]:
    """`modules.json`: what sentence-transformers chains, in order, and where each reads."""
    names = [("", "Transformer"), (POOLING_DIR, "Pooling"), (NORMALIZE_DIR, "Normalize")]
    return [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{cls}"}
        for i, (path, cls) in enumerate(names)
    ]


def pooling_config(hidden_dim: int, how: str) -> dict:
    if how not in pooling.CHOICES:
        raise SentenceTransformersExportError(f"pooling {how!r} is not one of {pooling.CHOICES}.")
    return {"word_embedding_dimension": hidden_dim} | {
        switch: mode == how for mode, switch in _SWITCHES.items()
    }


def model_config() -> dict:
    """`config_sentence_transformers.json`. transformers' version is the one that wrote
    config.json; PyTorch wrote nothing (the weights are safetensors from numpy)."""
    import transformers

    return {
        "__version__": {
            "sentence_transformers": CHECKED_WITH,
            "transformers": transformers.__version__,
        },
        "model_type": "SentenceTransformer",
        "prompts": {},
        "default_prompt_name": None,
        "similarity_fn_name": SIMILARITY,
    }


def check_framing(tokenizer_dir: str, info, max_length: int) -> None:
    """The tokenizer's own post-processor must frame a text as our embeddings do, or
    sentence-transformers would feed the model other ids than we do."""
    tokenizer, _ = tokenizer_files.load(tokenizer_dir)
    ours = embeddings.text_rows(tokenizer, info, [_PROBE], max_length)[0]
    theirs, _ = tokenizer_files.load(tokenizer_dir)
    theirs.encode_special_tokens = True  # what split_special_tokens sets in transformers
    theirs.enable_truncation(max_length)  # as sentence-transformers cuts: specials kept
    framed = theirs.encode(_PROBE).ids
    if framed != ours:
        raise SentenceTransformersExportError(
            f"{tokenizer_dir}/{tokenizer_files.TOKENIZER_JSON} frames a text as "
            f"{framed[:3]}...{framed[-2:]}, not as the model reads one ({ours[:3]}..."
            f"{ours[-2:]}): its post-processor must add the start and end tokens."
        )


def _split_special_tokens(folder: str) -> None:
    """transformers' tokenizer reads control tokens' strings in a text as characters."""
    path = fs.join(folder, tokenizer_files.TOKENIZER_CONFIG)
    fs.write_json(path, fs.read_json(path) | {"split_special_tokens": True})


def write(folder: str, source, info, how: str) -> None:
    """Writes the sentence-transformers files into `folder`, which holds `export_hf`'s."""
    check_framing(source.tokenizer_dir, info, source.max_sequence_length)
    hidden_dim = source.record.backbone_config["hidden_dim"]
    _split_special_tokens(folder)
    fs.write_json(fs.join(folder, MODULES), modules())
    fs.write_json(fs.join(folder, POOLING_CONFIG), pooling_config(hidden_dim, how))
    fs.write_json(fs.join(folder, NORMALIZE_CONFIG), NORMALIZE)
    sbert = {"max_seq_length": source.max_sequence_length, "do_lower_case": False}
    fs.write_json(fs.join(folder, SBERT_CONFIG), sbert)
    fs.write_json(fs.join(folder, ST_CONFIG), model_config())
