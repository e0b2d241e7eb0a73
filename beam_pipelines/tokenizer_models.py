"""The tokenizer models `train_tokenizer` trains (unigram, byte-level BPE, WordPiece): each
one untrained with its normalizer, pre-tokenizer, decoder and special tokens (`build`), its
alphabet kept to what the vocabulary holds (`keep_common_characters`), and its trained
vocabulary put in an order that depends on the corpus only (`canonical_ids`).
"""

from __future__ import annotations

import collections
import json

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)

from common import tokenizer_files
from common.errors import UserError

MODELS = ("unigram", "bpe", "wordpiece")


def build(model: str, vocab_size: int, min_frequency: int = 2):
    """An untrained tokenizer and its trainer, with special tokens for the model family."""
    special = tokenizer_files.SPECIAL_TOKENS[model]
    if model == "bpe":  # RoBERTa: byte-level BPE, <s> $A </s>; <mask> eats the space before it
        tokens = [special[r] for r in ("cls_token", "pad_token", "sep_token", "unk_token")]
        tokens.append(AddedToken(special["mask_token"], lstrip=True, special=True))
        tokenizer = Tokenizer(models.BPE())
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=tokens,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=True,
        )
        return tokenizer, trainer
    tokens = [special[r] for r in ("pad_token", "unk_token", "cls_token", "sep_token")]
    # The mask eats the space before it: in training a masked word's first piece ('▁the')
    # becomes the mask, so "of [MASK] command" must not leave a bare '▁' piece before it
    # (a model then fills in a word's continuation, not a word).
    tokens.append(AddedToken(special["mask_token"], lstrip=True, special=True))
    # Whitespace runs (newlines inside multi-line documents) become one space before
    # pre-tokenization: otherwise Metaspace learns thousands of tokens containing "\n".
    whitespace = normalizers.Replace(Regex(r"\s+"), " ")
    if model == "unigram":
        tokenizer = Tokenizer(models.Unigram())
        tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), whitespace])
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size,
            special_tokens=tokens,
            unk_token=special["unk_token"],
            show_progress=True,
        )
    elif model == "wordpiece":
        tokenizer = Tokenizer(models.WordPiece(unk_token=special["unk_token"]))
        # BERT's rule for Han: every character a word of its own (BertPreTokenizer splits
        # only at spaces and punctuation, so a Chinese clause would be one word, and
        # WordPiece makes a whole word the unknown token for one character it lacks).
        han = normalizers.BertNormalizer(
            clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False
        )
        tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), han, whitespace])
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=tokens,
            show_progress=True,
        )
    else:
        raise UserError(f"--model {model!r} is not one of {MODELS}")
    return tokenizer, trainer


def keep_common_characters(
    texts: list[str], tokenizer: Tokenizer, limit: int
) -> tuple[list[str], int]:
    """The texts, normalized, with all but the `limit` most frequent characters replaced by
    a space, and how many were left out.

    Unigram and WordPiece keep every character of their training text in the vocabulary:
    a corpus with more characters than the vocabulary holds (Chinese or Japanese: thousands
    of Han characters) stops unigram training ("not large enough to contain all chars") and
    makes WordPiece exceed `--vocab_size`. The rarest ones become the unknown token instead,
    as SentencePiece's character coverage does. Normalizing first counts what the model sees
    (the recipes' normalizers give the same text when applied twice)."""
    texts = [tokenizer.normalizer.normalize_str(text) for text in texts]
    counts = collections.Counter()
    for text in texts:
        counts.update(text)
    chars = sorted((c for c in counts if not c.isspace()), key=lambda c: (-counts[c], c))
    if len(chars) <= limit:
        return texts, 0
    rare = dict.fromkeys(map(ord, chars[limit:]), " ")
    return [text.translate(rare) for text in texts], len(chars) - limit


def alphabet_limit(model: str, vocab_size: int) -> int | None:
    """At most half the vocabulary for single characters (unigram, WordPiece; byte-level BPE
    has 256 bytes), so that pieces of several characters keep the other half."""
    return None if model == "bpe" else vocab_size // 2


def canonical_ids(tokenizer: Tokenizer, model: str) -> Tokenizer:
    """The trained vocabulary in an order that depends on the corpus only: `tokenizers`
    orders equal-scored unigram pieces, WordPiece's `##` alphabet and equal-count merges by its
    hash maps' per-process seeds, so the same corpus gave other ids run after run (seen on the
    demo: 168 of 2,000 WordPiece ids moved). Specials keep their ids; unigram pieces follow by
    score (ties by text); WordPiece tokens (whose ids its greedy longest match never reads)
    by single characters first, then text. Byte-level BPE is deterministic already."""
    if model == "bpe":
        return tokenizer
    data = json.loads(tokenizer.to_str())
    specials = set(tokenizer_files.SPECIAL_TOKENS[model].values())
    if model == "unigram":
        ordered = [p for p in data["model"]["vocab"] if p[0] in specials]
        # Scores differ in their last bits from run to run (parallel sums): rounded first.
        pieces = [[piece, round(score, 6)] for piece, score in data["model"]["vocab"]]
        ordered += _required_characters_sorted(
            sorted((p for p in pieces if p[0] not in specials), key=lambda p: (-p[1], p[0]))
        )
        data["model"]["vocab"] = ordered
        ids = {piece: i for i, (piece, _) in enumerate(ordered)}
        data["model"]["unk_id"] = ids[tokenizer_files.SPECIAL_TOKENS[model]["unk_token"]]
    else:
        vocab = data["model"]["vocab"]
        ordered = [t for t in sorted(vocab, key=vocab.get) if t in specials]
        single = lambda t: len(t.removeprefix("##")) == 1  # noqa: E731
        ordered += sorted((t for t in vocab if t not in specials), key=lambda t: (not single(t), t))
        ids = data["model"]["vocab"] = {token: i for i, token in enumerate(ordered)}
    for added in data["added_tokens"]:
        added["id"] = ids[added["content"]]
    return Tokenizer.from_str(json.dumps(data))


# The unigram trainer adds the characters it must keep with scores a fixed step apart above
# the lowest score (min, min + step, min + 2 step...), handed out in its hash map's order: the
# same scores are handed out here in character order.
_REQUIRED_STEP = 1e-4


def _required_characters_sorted(pieces: list) -> list:
    lowest = min((score for _, score in pieces), default=0.0)
    steps = {}
    for i, (piece, score) in enumerate(pieces):
        k = (score - lowest) / _REQUIRED_STEP
        if len(piece) == 1 and abs(k - round(k)) < 1e-3:
            steps.setdefault(round(k), []).append(i)
    block, k = [], 0
    while k in steps:  # the run of steps from the lowest score up
        block += steps[k]
        k += 1
    scores = sorted((pieces[i][1] for i in block), reverse=True)
    out = [list(p) for p in pieces]
    for i, char, score in zip(sorted(block), sorted(pieces[i][0] for i in block), scores):
        out[i] = [char, score]
    return sorted(out, key=lambda p: (-p[1], p[0]))
