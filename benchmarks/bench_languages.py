"""Tokenizers and whole-word masking per script, on real translated text the machine ships.

    python -m benchmarks.bench_languages [--langs zh,ja,th,ko,de,ru,en] [--vocab_size 8000]
        [--max_chars 1500000] [--models unigram,bpe,wordpiece]

For every language and tokenizer recipe of `beam_pipelines.tokenizer_models`, trains the
recipe on 90 % of the language's documents (`benchmarks.system_texts`: gettext catalogs and
man pages; English: the catalogs' English source strings) and measures on the other 10 %:

* coverage: the share of held-out characters (whitespace aside) that come out as the unknown
  token (`unk %`), tokens per character (`tok/char`), and the vocabulary actually trained;
* whole-word masking units (what `--masking whole_word` masks together: a word-start token
  and the continuation tokens after it), in tokens: mean, p99, max and the share of tokens
  in units of more than 10 tokens, with the table of `word_tables.word_starts` before
  (space marks only) and after (plus a unit per Han/Kana character or Thai cluster) the
  rule for unspaced scripts, and then with the token after such a unit starting a word too
  (`word_tables.unit_tables`: a Latin run glued to Chinese is a word of its own), for
  the units whose text begins with a character of a script written without spaces and
  (after) for the other units, words of spaced scripts (the Latin names and options in
  these texts); `same` says whether the first two tables are identical.

Figures are in docs/languages.md.
"""

from __future__ import annotations

import argparse
import time
import zlib

import numpy as np

from beam_pipelines import tokenizer_models
from benchmarks import system_texts
from common import tokenizer_files, word_tables, word_units


def split_documents(lang: str, max_chars: int) -> tuple[list[str], list[str]]:
    """(train, held-out): a fixed 10 % by a hash of the text, at most `max_chars` in all."""
    docs = system_texts.english_documents() if lang == "en" else system_texts.documents(lang)
    train, held_out, size = [], [], 0
    for doc in docs:
        if size >= max_chars:
            break
        size += len(doc)
        (held_out if zlib.crc32(doc.encode()) % 10 == 0 else train).append(doc)
    return train, held_out


def unit_lengths(encodings, texts, tables) -> tuple[np.ndarray, np.ndarray]:
    """Lengths in tokens of the units whole-word masking takes (special tokens aside) with
    `tables` (`word_starts`, or it and `unit_tables`' two): of those whose text begins with
    a character of a script written without spaces, and of the others (words of spaced
    scripts, numbers, code in the same text)."""
    lengths = ([], [])
    for encoding, text in zip(encodings, texts):
        units = []  # [start offset, end offset, tokens]
        starts = word_tables.starts_in(encoding.ids, *tables)
        for start, special, (a, b) in zip(starts, encoding.special_tokens_mask, encoding.offsets):
            if special:
                continue
            if start or not units:
                units.append([a, b, 0])
            units[-1][1:] = [b, units[-1][2] + 1]
        for a, b, count in units:
            first = text[a:b].lstrip()[:1]
            lengths[0 if first and word_units.has_unspaced(first) else 1].append(count)
    return tuple(np.array(x or [0]) for x in lengths)


def unit_stats(lengths: np.ndarray) -> str:
    if not lengths.any():
        return f"{'-':^21}"  # no such unit in this text
    long_share = lengths[lengths > 10].sum() / max(lengths.sum(), 1)
    return (
        f"{lengths.mean():5.2f} {np.percentile(lengths, 99):4.0f} {lengths.max():4d} "
        f"{100 * long_share:5.1f}%"
    )


def coverage(tokenizer, encodings, texts) -> tuple[float, float]:
    """(share of non-space characters inside unknown tokens, tokens per such character)."""
    unk = {tokenizer.token_to_id(t) for t in ("[UNK]", "<unk>")} - {None}
    chars = unknown = tokens = 0
    for text, encoding in zip(texts, encodings):
        chars += sum(not c.isspace() for c in text)
        tokens += sum(not s for s in encoding.special_tokens_mask)
        unknown += sum(
            sum(not c.isspace() for c in text[a:b])
            for token_id, (a, b) in zip(encoding.ids, encoding.offsets)
            if token_id in unk
        )
    return unknown / max(chars, 1), tokens / max(chars, 1)


def measure(lang: str, model: str, train: list[str], held_out: list[str], vocab_size: int):
    start = time.perf_counter()
    tokenizer, trainer = tokenizer_models.build(model, vocab_size)
    trainer.show_progress = False
    if limit := tokenizer_models.alphabet_limit(model, vocab_size):  # as `train` does
        train, _ = tokenizer_models.keep_common_characters(train, tokenizer, limit)
    tokenizer.train_from_iterator(train, trainer=trainer)
    tokenizer_files.add_post_processor(tokenizer, model)
    seconds = time.perf_counter() - start
    encodings = tokenizer.encode_batch(held_out)
    unk, per_char = coverage(tokenizer, encodings, held_out)
    before = word_tables.word_starts(tokenizer, unspaced_units=False)
    after = word_tables.word_starts(tokenizer)
    unspaced_before, _ = unit_lengths(encodings, held_out, (before,))
    unspaced_after, spaced_after = unit_lengths(encodings, held_out, (after,))
    glued = unit_lengths(encodings, held_out, (after, *word_tables.unit_tables(tokenizer)))
    print(
        f"{lang:3} {model:9} {tokenizer.get_vocab_size():6d} {100 * unk:6.2f}% "
        f"{per_char:8.3f} | {unit_stats(unspaced_before)} | {unit_stats(unspaced_after)} | "
        f"{unit_stats(spaced_after)} | {unit_stats(glued[0])} | {unit_stats(glued[1])} | "
        f"{'same' if before == after else 'new':4} {seconds:5.1f}s",
        flush=True,
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--langs", default="zh,ja,th,ko,de,ru,en")
    parser.add_argument("--models", default=",".join(tokenizer_models.MODELS))
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument(
        "--max_chars",
        type=int,
        default=1_500_000,
        help="characters of text per language (train + held out)",
    )
    args = parser.parse_args(argv)
    print(
        "whole-word masking units in tokens: mean, p99, max, share of tokens in units > 10 "
        "tokens; before = space marks only, after = plus unspaced-script units; units whose "
        "text begins with a Han/Kana/Thai/... character, and the other units (words)"
    )
    print(
        f"{'':14} {'vocab':>6} {'unk':>7} {'tok/char':>8} | {'unspaced, before':^21} | "
        f"{'unspaced, after':^21} | {'words, after':^21} | {'unspaced, + glued':^21} | "
        f"{'words, + glued':^21} | table"
    )
    for lang in args.langs.split(","):
        train, held_out = split_documents(lang, args.max_chars)
        print(
            f"# {lang}: {len(train)} documents to train, {len(held_out)} held out, "
            f"{sum(map(len, train + held_out)):,} characters",
            flush=True,
        )
        for model in args.models.split(","):
            measure(lang, model, train, held_out, args.vocab_size)


if __name__ == "__main__":
    main()
