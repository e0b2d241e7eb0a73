"""Near dedup per language: recall on near-duplicate pairs and false positives on pairs of
different documents, shingles over whitespace words (the old way) and over word units
(`minhash.units_of`, common/word_units.py), side by side, at the default settings.

    python -m benchmarks.bench_near_dedup [--pairs 200] [--change 0.01] [--near_ngram 5]
    python -m benchmarks.bench_near_dedup --memory_mb 4   # peak memory at 1x, 4x, 16x

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

`--memory_mb M` instead runs `prepare --dedup near` on the local runner in a child process on
M, 4M and 16M bytes of the demo corpus (different docstrings, beam_pipelines/demo_corpus.py)
and prints each run's peak memory (RSS) and the growth per byte of text between them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import subprocess
import sys
import time

from beam_pipelines import demo_corpus, minhash, train_tokenizer
from beam_pipelines.dedup import normalise
from benchmarks import system_texts
from benchmarks.bench_prepare import PEAK_CODE
from common import manifest, word_units

LANGS = ("zh", "ja", "th", "ko", "de", "ru", "en")
UNITS = {"old (split)": lambda text: normalise(text).split(), "new (units)": minhash.units_of}


def distinct_documents(lang: str, min_chars: int) -> list[str]:
    docs = (
        system_texts.english_documents(min_chars)
        if lang == "en"
        else system_texts.catalog_documents(lang, min_chars) + system_texts.man_documents(lang)
    )
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
    edits = sorted(
        rng.sample(range(len(spans)), max(1, round(change * len(spans)))), reverse=True
    )  # from the end: earlier spans keep their offsets
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


def pairs(
    lang: str, n: int, change: float, seed: int, min_chars: int
) -> tuple[list, list, list[str]]:
    docs = distinct_documents(lang, min_chars)
    rng = random.Random(f"{lang}:{seed}")
    donors = [u for doc in rng.sample(docs, min(50, len(docs))) for u in word_units.units(doc)]
    n = min(n, len(docs) - 1)  # Thai's catalogs are small: fewer pairs
    originals = rng.sample(docs, n)
    positive = [(doc, near_copy(doc, change, rng, donors)) for doc in originals]
    by_length = sorted(docs, key=len)
    negative = [(by_length[i], by_length[i + 1]) for i in rng.sample(range(len(by_length) - 1), n)]
    return positive, negative, originals


def found(pair, units, config) -> bool:
    docs = {(0, i): units(text) for i, text in enumerate(pair)}
    return bool(minhash.near_duplicates(docs, config))


def peak_memory(megabytes: float, out: str) -> tuple[int, int, float, dict]:
    """`prepare --dedup near` of `megabytes` of the demo corpus in a child process: (bytes
    of text, peak RSS, wall seconds, the run's accounting)."""
    corpus = os.path.join(out, f"corpus-{megabytes:g}mb.jsonl")
    if not os.path.exists(corpus):
        demo_corpus.write_corpus(corpus, int(megabytes * 1e6))
    tok_dir = os.path.join(out, "tokenizer")
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        train_tokenizer.train(
            train_tokenizer.TokenizerConfig(
                output_dir=tok_dir,
                input=corpus,
                model="unigram",
                vocab_size=3000,
                max_documents=5000,
            )
        )
    prepared = os.path.join(out, f"prepared-{megabytes:g}mb")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PEAK_CODE,
            "--runner=FnApiRunner",
            "--input",
            corpus,
            "--tokenizer",
            tok_dir,
            "--output_dir",
            prepared,
            "--max_length",
            "128",
            "--validation_fraction",
            "0.01",
            "--dedup",
            "near",
            "--progress_seconds",
            "0",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    peak, wall = proc.stdout.split("PEAK")[-1].split()
    run = manifest.read_manifest(os.path.join(prepared, "train")).accounting["run"]
    return os.path.getsize(corpus), int(peak), float(wall), run


def report_memory(megabytes: float, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    print(
        "| text | peak RSS | wall | near copies removed | growth per byte of text since "
        "the previous row |"
    )
    print("|---|---|---|---|---|")
    previous = None
    for factor in (1, 4, 16):
        size, peak, wall, run = peak_memory(megabytes * factor, out)
        slope = "" if previous is None else f"{(peak - previous[1]) / (size - previous[0]):.2f}"
        print(
            f"| {size / 1e6:.0f} MB | {peak / 1e9:.2f} GB | {wall:.0f} s | "
            f"{run['duplicates_by_kind'].get('near', 0):,} | {slope} |",
            flush=True,
        )
        previous = (size, peak)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--change", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--min_chars",
        type=int,
        default=1000,
        help="characters of catalog messages per document (a man page is one)",
    )
    parser.add_argument("--near_ngram", type=int, default=minhash.MinHashConfig.near_ngram)
    parser.add_argument("--langs", default=",".join(LANGS))
    parser.add_argument(
        "--memory_mb",
        type=float,
        default=0,
        help="instead: peak memory of prepare --dedup near at 1x, 4x, 16x",
    )
    parser.add_argument("--out", default="bench_out/near_dedup")
    args = parser.parse_args(argv)
    if args.memory_mb:
        report_memory(args.memory_mb, args.out)
        return 0
    config = dataclasses.replace(minhash.MinHashConfig(), near_ngram=args.near_ngram)
    print(
        f"{args.pairs} pairs per language, documents of >= {args.min_chars} characters, "
        f"{100 * args.change:g} % of units changed, "
        f"{args.near_ngram}-unit shingles, {config.near_bands} bands x {config.near_rows} "
        f"rows, threshold {config.near_threshold}"
    )
    print(
        "| language | median units (old / new) | recall old | recall new "
        "| false positives old | false positives new |"
    )
    print("|---|---|---|---|---|---|")
    for lang in args.langs.split(","):
        start = time.perf_counter()
        positive, negative, originals = pairs(
            lang, args.pairs, args.change, args.seed, args.min_chars
        )
        cells = []
        for units in UNITS.values():
            hits = sum(found(pair, units, config) for pair in positive)
            false = sum(found(pair, units, config) for pair in negative)
            cells.append((hits, false))
        sizes = [statistics.median(len(units(d)) for d in originals) for units in UNITS.values()]
        n = len(positive)
        print(
            f"| {lang} | {sizes[0]:.0f} / {sizes[1]:.0f} | {cells[0][0]}/{n} | "
            f"{cells[1][0]}/{n} | {cells[0][1]}/{n} | {cells[1][1]}/{n} |",
            flush=True,
        )
        print(f"  ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
