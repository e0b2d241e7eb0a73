"""Near dedup per language: recall on near-duplicate pairs and false positives on pairs of
different documents, shingles over whitespace words (the old way) and over word units
(`minhash.units_of`, common/word_units.py), side by side, at the default settings.

    python -m benchmarks.bench_near_dedup [--pairs 200] [--change 0.01] [--near_ngram 5]

Documents are real translated text the machine ships (benchmarks/system_texts.py: gettext
catalogs and man pages) for zh, ja, th, ko, de, ru; English is the catalogs' msgids (the
source strings those catalogs translate), made into documents the same way. A catalog
document is consecutive messages up to `--min_chars` (1,000) characters: ~150 words, ~900
Chinese characters, so that 1 % of its units is one change or more, not one change that
is 2 % of a short document. A positive pair
is a document and a copy with `--change` of its units (words, or characters in Chinese,
Japanese and Thai) changed at random: each change substitutes a unit from another document,
inserts one or deletes one. A negative pair is two different documents of similar length
(neighbours by length; real catalogs hold some genuine near copies, so a few "false"
positives may be true ones). Each pair is judged alone, as prepare judges a later document
against an earlier one: same LSH bucket and estimated Jaccard >= --near_threshold.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import gettext
import random
import statistics
import struct
import sys
import time

from beam_pipelines import minhash
from beam_pipelines.dedup import normalise
from benchmarks import system_texts
from common import word_units

LANGS = ("zh", "ja", "th", "ko", "de", "ru", "en")
UNITS = {"old (split)": lambda text: normalise(text).split(), "new (units)": minhash.units_of}


def english_documents(min_chars: int) -> list[str]:
    """Documents of the English source strings (msgids) of the German catalogs."""
    docs = []
    for path in sorted(glob.glob("/usr/share/locale/de/LC_MESSAGES/*.mo")):
        try:
            with open(path, "rb") as f:
                keys = gettext.GNUTranslations(f)._catalog  # the msgid -> msgstr table
        except (OSError, ValueError, struct.error):
            continue
        current = []
        for key in sorted((k for k in keys if isinstance(k, str) and k.strip()), key=str):
            current.append(key.strip())
            if sum(map(len, current)) >= min_chars:
                docs.append("\n".join(current))
                current = []
    return docs


def distinct_documents(lang: str, min_chars: int) -> list[str]:
    docs = (english_documents(min_chars) if lang == "en" else
            system_texts.catalog_documents(lang, min_chars) + system_texts.man_documents(lang))
    seen, out = set(), []
    for doc in docs:
        key = normalise(doc)
        if key and key not in seen:
            seen.add(key)
            out.append(doc)
    return out


def unit_spans(text: str) -> list[tuple[int, int]]:
    """Where each word unit of `text` lies in it: units are substrings, in order."""
    spans, pos = [], 0
    for unit in word_units.units(text):
        start = text.index(unit, pos)
        spans.append((start, start + len(unit)))
        pos = start + len(unit)
    return spans


def near_copy(text: str, change: float, rng: random.Random, donors: list[str]) -> str:
    """`text` with max(1, round(change x units)) units substituted, inserted or deleted."""
    spans = unit_spans(text)
    edits = sorted(rng.sample(range(len(spans)), max(1, round(change * len(spans)))),
                   reverse=True)  # from the end: earlier spans keep their offsets
    for i in edits:
        start, end = spans[i]
        donor = rng.choice(donors)
        glue = " " if word_units.is_spaced_word(donor) else ""
        op = rng.choice(("substitute", "insert", "delete"))
        if op == "substitute":
            text = text[:start] + donor + text[end:]
        elif op == "insert":
            text = text[:start] + donor + glue + text[start:]
        else:
            text = text[:start] + text[end:].lstrip(" ") if glue else text[:start] + text[end:]
    return text


def pairs(lang: str, n: int, change: float, seed: int,
          min_chars: int) -> tuple[list, list, list[str]]:
    docs = distinct_documents(lang, min_chars)
    rng = random.Random(f"{lang}:{seed}")
    donors = [u for doc in rng.sample(docs, min(50, len(docs))) for u in word_units.units(doc)]
    n = min(n, len(docs) - 1)  # Thai's catalogs are small: fewer pairs
    originals = rng.sample(docs, n)
    positive = [(doc, near_copy(doc, change, rng, donors)) for doc in originals]
    by_length = sorted(docs, key=len)
    negative = [(by_length[i], by_length[i + 1])
                for i in rng.sample(range(len(by_length) - 1), n)]
    return positive, negative, originals


def found(pair, units, config) -> bool:
    docs = {(0, i): units(text) for i, text in enumerate(pair)}
    return bool(minhash.near_duplicates(docs, config))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--change", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min_chars", type=int, default=1000,
                        help="characters of catalog messages per document (a man page is one)")
    parser.add_argument("--near_ngram", type=int, default=minhash.MinHashConfig.near_ngram)
    parser.add_argument("--langs", default=",".join(LANGS))
    args = parser.parse_args(argv)
    config = dataclasses.replace(minhash.MinHashConfig(), near_ngram=args.near_ngram)
    print(f"{args.pairs} pairs per language, documents of >= {args.min_chars} characters, "
          f"{100 * args.change:g} % of units changed, "
          f"{args.near_ngram}-unit shingles, {config.near_bands} bands x {config.near_rows} "
          f"rows, threshold {config.near_threshold}")
    print("| language | median units (old / new) | recall old | recall new "
          "| false positives old | false positives new |")
    print("|---|---|---|---|---|---|")
    for lang in args.langs.split(","):
        start = time.perf_counter()
        positive, negative, originals = pairs(lang, args.pairs, args.change, args.seed,
                                               args.min_chars)
        cells = []
        for units in UNITS.values():
            hits = sum(found(pair, units, config) for pair in positive)
            false = sum(found(pair, units, config) for pair in negative)
            cells.append((hits, false))
        sizes = [statistics.median(len(units(d)) for d in originals) for units in UNITS.values()]
        n = len(positive)
        print(f"| {lang} | {sizes[0]:.0f} / {sizes[1]:.0f} | {cells[0][0]}/{n} | "
              f"{cells[1][0]}/{n} | {cells[0][1]}/{n} | {cells[1][1]}/{n} |", flush=True)
        print(f"  ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
