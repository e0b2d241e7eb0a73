"""keras-hub presets by name for `--init_from`, and the tokenizer such a preset carries.

A name is a keras-hub preset (`roberta_base_en`, `bert_base_en_uncased`: each stands for a
versioned Kaggle handle such as `kaggle://keras/roberta/keras/roberta_base_en/3`) or a
`kaggle://OWNER/MODEL/keras/VARIATION[/VERSION]` handle (our export pushes presets there).
keras-hub downloads them with kagglehub; so does `download`, which then reads the preset
folder like any local one.

Offline (read in kagglehub 1.0.2's `http_resolver.ModelHttpResolver`): a handle WITH its
version is served from kagglehub's cache (`KAGGLEHUB_CACHE`, default
`~/.cache/kagglehub/models/OWNER/MODEL/keras/VARIATION/VERSION/`, complete when kagglehub's
marker says so) without a network call; a handle without a version asks the Kaggle API for the
newest one first and fails. A preset name carries its version, so a machine that downloaded it
once (`keras_hub.models.Backbone.from_preset(name)` or `kagglehub.model_download`) can start
from it offline; anything else is one line saying so.

keras-hub's tokenizers keep their vocabulary in the preset's `assets/tokenizer/`
(`vocabulary.json` + `merges.txt`: byte-level BPE, RoBERTa; `vocabulary.txt`: WordPiece,
BERT), which prepare and the trainer cannot read: `tokenizer_of` rebuilds the same tokenizer
in `tokenizers` (the ids are tested equal to keras-hub's) and `main` writes it as a tokenizer
folder for prepare's `--tokenizer`.

Example:
    >>> folder, version = download("roberta_base_en")      # from the kagglehub cache
    >>> tokenizer, special = tokenizer_of(folder)
    python -m trainer.keras_hub_presets --preset roberta_base_en --output_dir tok/
"""

from __future__ import annotations

import os

from common import flags, fs, tokenizer_files
from common.errors import UserError, run_cli
from trainer import families

KAGGLE = "kaggle://"
ASSETS = "assets/tokenizer"
KERAS_TOKENIZER = "tokenizer.json"  # keras-hub's own tokenizer config (not a `tokenizers` file)
# keras-hub's tokenizer class -> our tokenizer model (its special tokens: tokenizer_files).
MODELS = dict(f.preset_tokenizer for f in families.ALL if f.preset_tokenizer)


class PresetError(UserError):
    """A preset name that cannot be used here; one line for the user."""


def handle_of(name: str) -> str | None:
    """The Kaggle handle of a keras-hub preset name or kaggle:// URI; None for anything else."""
    if name.startswith(KAGGLE):
        return name.removeprefix(KAGGLE)
    if "/" in name or os.sep in name:
        return None
    import keras_hub

    entry = keras_hub.models.Backbone.presets.get(name)
    return entry["kaggle_handle"].removeprefix(KAGGLE) if entry else None


def download(name: str) -> tuple[str, str | None]:
    """(the preset's local folder, its Kaggle version) from kagglehub (its cache offline)."""
    handle = handle_of(name)
    try:
        import kagglehub

        folder = kagglehub.model_download(handle)
    except Exception as err:  # offline, unknown handle, no access: all one line
        versioned = len(handle.split("/")) == 5
        hint = "" if versioned else " (offline, only a handle with its /VERSION is read from it)"
        raise PresetError(
            f"keras-hub preset {name}: kaggle://{handle} is not in the kagglehub cache"
            f"{hint} and could not be downloaded ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:160] if str(err) else ''})."
        ) from None
    version = os.path.basename(os.path.normpath(folder))
    return folder, version if version.isdigit() else None


def tokenizer_of(preset_dir: str):
    """(tokenizers.Tokenizer, special tokens by role) equal to the preset's keras-hub
    tokenizer, or None if the preset has no tokenizer of a family with `preset_tokenizer`."""
    path = fs.join(preset_dir, KERAS_TOKENIZER)
    if not fs.exists(path):
        return None
    config = fs.read_json(path)
    model = MODELS.get(config.get("registered_name"))
    if model is None:
        return None
    special = dict(tokenizer_files.SPECIAL_TOKENS[model])
    assets = fs.join(preset_dir, ASSETS)
    if model == "bpe":
        tokenizer = _byte_level_bpe(assets, config["config"])
    else:
        tokenizer = _wordpiece(assets, config["config"])
    missing = [t for t in special.values() if tokenizer.token_to_id(t) is None]
    if missing:
        raise PresetError(
            f"{preset_dir}: the tokenizer's vocabulary lacks {', '.join(sorted(set(missing)))}"
            "; a masked language model needs cls, sep, pad, unk and mask tokens."
        )
    tokenizer.add_special_tokens(sorted(set(special.values())))
    tokenizer_files.add_post_processor(tokenizer, model, special)
    return tokenizer, special


def _byte_level_bpe(assets: str, config: dict):
    """keras-hub's BytePairTokenizer: GPT-2's split regex over byte-level characters, then
    the merges by rank; no prefix space unless its config says so."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = fs.read_json(fs.join(assets, "vocabulary.json"))
    lines = fs.read_bytes(fs.join(assets, "merges.txt")).decode("utf-8").splitlines()
    merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#")]
    tokenizer = Tokenizer(models.BPE(vocab, merges))
    prefix = bool(config.get("add_prefix_space", False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _wordpiece(assets: str, config: dict):
    """keras-hub's WordPieceTokenizer: accents stripped and text lowercased as its config
    says, split on whitespace, punctuation and CJK characters, then greedy longest match."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    words = fs.read_bytes(fs.join(assets, "vocabulary.txt")).decode("utf-8").splitlines()
    vocab = {word: i for i, word in enumerate(words)}
    prefix = config.get("suffix_indicator", "##")
    tokenizer = Tokenizer(
        models.WordPiece(
            vocab, unk_token=config.get("oov_token", "[UNK]"), continuing_subword_prefix=prefix
        )
    )
    lowercase = bool(config.get("lowercase", False))
    bert = normalizers.BertNormalizer(
        clean_text=False,
        handle_chinese_chars=bool(config.get("split_on_cjk", True)),
        strip_accents=bool(config.get("strip_accents", False)),
        lowercase=lowercase,
    )
    # keras-hub lowercases with NFKC case folding: NFKC, lowercasing, and the two common
    # letters that case folding maps further (German sharp s, Greek final sigma); the rare
    # rest of full case folding has no `tokenizers` normalizer.
    folding = [
        normalizers.NFKC(),
        bert,
        normalizers.Replace("ß", "ss"),
        normalizers.Replace("ς", "σ"),
    ]
    tokenizer.normalizer = normalizers.Sequence(folding) if lowercase else bert
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix=prefix)
    return tokenizer


def info_of(preset_dir: str):
    """The TokenizerInfo that `write` gives the preset's tokenizer (None if it has none)."""
    found = tokenizer_of(preset_dir)
    if found is None:
        return None
    tokenizer, special = found
    data = tokenizer.to_str(pretty=True).encode("utf-8")
    ids = {role: tokenizer.token_to_id(special[role]) for role in tokenizer_files.ROLES}
    return tokenizer_files.TokenizerInfo(
        tokenizer_files.fingerprint(data), tokenizer.get_vocab_size(), ids
    )


def write(preset: str, output_dir: str) -> str:
    """Writes the preset's tokenizer as a tokenizer folder; returns its fingerprint."""
    folder = download(preset)[0] if handle_of(preset) and not fs.exists(preset) else preset
    found = tokenizer_of(folder)
    if found is None:
        kinds = families.said([f for f in families.ALL if f.preset_tokenizer])
        raise PresetError(f"{preset} holds no keras-hub tokenizer of a {kinds} model.")
    tokenizer, special = found
    length = fs.read_json(fs.join(folder, "config.json"))["config"].get("max_sequence_length", 512)
    return tokenizer_files.save(tokenizer, output_dir, special, length)


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", required=True, help="preset folder, name or kaggle:// handle")
    parser.add_argument("--output_dir", required=True, help="the tokenizer folder to write")
    args = parser.parse_args(argv)

    def body():
        print(f"sha256 {write(args.preset, args.output_dir)}: {args.output_dir}")

    return run_cli(body, argv)
