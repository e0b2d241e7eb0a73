"""Tokenizer files: what a tokenizer folder holds, its fingerprint and its special tokens.

A folder holds `tokenizer.json` (the `tokenizers` model, the source of truth),
`tokenizer_config.json` and `special_tokens_map.json`, so that both
`tokenizers.Tokenizer.from_file` and `transformers.AutoTokenizer.from_pretrained` load it.
"""

from __future__ import annotations

import dataclasses
import hashlib

from common import fs
from common.errors import UserError

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
ROLES = ("cls_token", "sep_token", "pad_token", "unk_token", "mask_token")

# Special tokens per tokenizer model: BERT-style for unigram (as the HF example) and wordpiece,
# RoBERTa-style for byte-level BPE. Distinct tokens in order = ids 0..4.
SPECIAL_TOKENS = {
    "unigram": {
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    },
    "wordpiece": {
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    },
    "bpe": {
        "cls_token": "<s>",
        "pad_token": "<pad>",
        "sep_token": "</s>",
        "unk_token": "<unk>",
        "mask_token": "<mask>",
        "bos_token": "<s>",
        "eos_token": "</s>",
    },  # RoBERTa also names them bos/eos
}


class TokenizerFilesError(UserError):
    """A tokenizer folder that is missing, incomplete or corrupt; one line for the user."""


@dataclasses.dataclass(frozen=True)
class TokenizerInfo:
    """What the data and the model must agree on about a tokenizer."""

    fingerprint: str  # sha256 of tokenizer.json
    vocab_size: int
    special_token_ids: dict  # role -> id, e.g. {"mask_token": 4, ...}

    @property
    def pad_id(self) -> int:
        return self.special_token_ids["pad_token"]

    @property
    def mask_id(self) -> int:
        return self.special_token_ids["mask_token"]

    @property
    def all_special_ids(self) -> list[int]:
        return sorted(set(self.special_token_ids.values()))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def fingerprint(tokenizer_json: bytes) -> str:
    return hashlib.sha256(tokenizer_json).hexdigest()


def load(tokenizer_dir: str):
    """Loads `(tokenizers.Tokenizer, TokenizerInfo)` from a local or gs:// folder."""
    from tokenizers import Tokenizer

    json_path = fs.join(tokenizer_dir, TOKENIZER_JSON)
    if not fs.exists(json_path):
        raise TokenizerFilesError(
            f"{tokenizer_dir} holds no {TOKENIZER_JSON}; train one with "
            "`python -m beam_pipelines.train_tokenizer` first."
        )
    data = fs.read_bytes(json_path)
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as err:  # tokenizers raises a bare Exception for a malformed file
        raise TokenizerFilesError(
            f"{json_path} is not a valid tokenizers file: {str(err).splitlines()[0][:200]}"
        ) from None
    config_path = fs.join(tokenizer_dir, TOKENIZER_CONFIG)
    try:
        config = fs.read_json(config_path) if fs.exists(config_path) else {}
    except ValueError as err:
        raise TokenizerFilesError(f"{config_path} is not valid JSON: {err}") from None
    ids = {}
    for role in ROLES:
        token = config.get(role)
        if isinstance(token, dict):  # transformers may store AddedToken dicts
            token = token.get("content")
        token_id = tokenizer.token_to_id(token) if token else None
        if token_id is None:
            raise TokenizerFilesError(
                f"{tokenizer_dir}: {TOKENIZER_CONFIG} does not name a {role} that is in the "
                "vocabulary; a masked language model needs cls, sep, pad, unk and mask tokens."
            )
        ids[role] = token_id
    check_ids(tokenizer, json_path)
    info = TokenizerInfo(fingerprint(data), tokenizer.get_vocab_size(), ids)
    return tokenizer, info


def text_only(tokenizer):
    """`tokenizer`, reading the control tokens' strings in a text (`<s>`, `[CLS]`, `<mask>`) as
    characters: a document that quotes HTML's `<s>` must not carry a control id where the model
    never sees one (ModernBERT would open a new document there). A setting of the loaded object,
    not of tokenizer.json: the fingerprint is unchanged. Fill-mask inputs, whose mask token is
    the user's ask, do not use it."""
    tokenizer.encode_special_tokens = True
    return tokenizer


def check_ids(tokenizer, where: str) -> None:
    """Every token id must be below the vocabulary size (the count of tokens), the number of
    embeddings a model gets: a vocabulary with gaps in its ids would give ids no model row
    (and ids of 65,536 or more do not fit the pipeline's 16-bit rows of such a vocabulary)."""
    size = tokenizer.get_vocab_size()
    top = max(tokenizer.get_vocab(with_added_tokens=True).values(), default=-1)
    if top >= size:
        raise TokenizerFilesError(
            f"{where}: token {tokenizer.id_to_token(top)!r} has id {top}, but the vocabulary "
            f"holds {size} tokens, so ids must be below {size}; renumber the vocabulary "
            "without gaps or train a tokenizer with `python -m beam_pipelines.train_tokenizer`."
        )


def add_post_processor(tokenizer, model: str, special: dict | None = None) -> None:
    """`[CLS] $A [SEP]` (unigram, wordpiece) or `<s> $A </s>` (bpe) around every document, and
    the pair template; `special` (cls_token, sep_token...) defaults to the model's own."""
    from tokenizers import processors

    special = special or SPECIAL_TOKENS[model]
    cls, sep = special["cls_token"], special["sep_token"]
    cls_id, sep_id = tokenizer.token_to_id(cls), tokenizer.token_to_id(sep)
    if model == "bpe":
        tokenizer.post_processor = processors.RobertaProcessing(
            (sep, sep_id), (cls, cls_id), add_prefix_space=False
        )
    else:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {sep}",
            pair=f"{cls} $A {sep} $B:1 {sep}:1",
            special_tokens=[(cls, cls_id), (sep, sep_id)],
        )


def save(tokenizer, tokenizer_dir: str, special_tokens: dict, model_max_length: int) -> str:
    """Writes the folder; returns the fingerprint.

    `tokenizer_class` is PreTrainedTokenizerFast so that transformers 4.x (the legacy HF example's
    TensorFlow trainer) loads it too: transformers 5 would write `TokenizersBackend`.
    """
    data = tokenizer.to_str(pretty=True).encode("utf-8")
    fs.write_bytes(fs.join(tokenizer_dir, TOKENIZER_JSON), data)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_max_length,
        "model_input_names": ["input_ids", "attention_mask"],
        "clean_up_tokenization_spaces": False,
        **special_tokens,
    }
    fs.write_json(fs.join(tokenizer_dir, TOKENIZER_CONFIG), config)
    special_map = {k: v for k, v in config.items() if k.endswith("_token")}
    fs.write_json(fs.join(tokenizer_dir, SPECIAL_TOKENS_MAP), special_map)
    return fingerprint(data)


def copy(tokenizer_dir: str, target_dir: str, max_model_length: int | None = None) -> None:
    """Copies a tokenizer folder's files; `max_model_length` caps `model_max_length` (a model
    with fewer positions must not let transformers pipelines pass longer inputs)."""
    for name in (TOKENIZER_JSON, SPECIAL_TOKENS_MAP, TOKENIZER_CONFIG):
        source = fs.join(tokenizer_dir, name)
        if name == TOKENIZER_CONFIG and max_model_length is not None:
            config = fs.read_json(source)
            config["model_max_length"] = min(
                config.get("model_max_length", max_model_length), max_model_length
            )
            fs.write_json(fs.join(target_dir, name), config)
        elif fs.exists(source):
            fs.write_bytes(fs.join(target_dir, name), fs.read_bytes(source))
