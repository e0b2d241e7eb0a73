"""`make demo-multilingual`: a small Chinese, Japanese, Thai and English corpus, and what the
tokenizer and the run made of it.

    python -m benchmarks.demo_multilingual corpus --output corpus.jsonl [--chars 250000]
    python -m benchmarks.demo_multilingual report --corpus corpus.jsonl --tokenizer TOK \\
        [--run_dir RUN]

`corpus` writes up to `--chars` characters per language of real translated text the machine
ships (`benchmarks.system_texts`; English: the catalogs' source strings), or, where the
machine has none, the project's own sentences (tests/support/multilingual.py), shuffled, one
JSONL document a line with its `lang`. `report` prints per language the tokenizer's tokens
per character, its unknown-token rate and the length in tokens of the units whole-word
masking takes (words of spaced scripts, characters of the others), then the run's final
metrics.
"""

from __future__ import annotations

import argparse
import json
import random

from benchmarks import bench_languages, system_texts
from common import tokenizer_files, word_tables
from tests.support import multilingual

LANGS = ("zh", "ja", "th", "en")


def language_documents(lang: str, chars: int) -> list[str]:
    """Documents of `lang`, at most `chars` characters in all."""
    docs = system_texts.english_documents() if lang == "en" else system_texts.documents(lang)
    docs = [d for d in docs if len(d) <= 4 * 1024] or multilingual.documents(lang, 400)
    taken, size = [], 0
    for doc in random.Random(lang).sample(docs, len(docs)):
        if size >= chars:
            break
        taken.append(doc)
        size += len(doc)
    return taken


def write_corpus(output: str, chars: int) -> None:
    rows = [{"text": d, "lang": lang} for lang in LANGS for d in language_documents(lang, chars)]
    random.Random(0).shuffle(rows)
    with open(output, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    counts = {lang: sum(r["lang"] == lang for r in rows) for lang in LANGS}
    print(
        f"{output}: {len(rows):,} documents {counts}, "
        f"{sum(len(r['text']) for r in rows):,} characters"
    )


def report(corpus: str, tokenizer_dir: str, run_dir: str | None) -> None:
    tokenizer, _ = tokenizer_files.load(tokenizer_dir)
    tables = (word_tables.word_starts(tokenizer), *word_tables.unit_tables(tokenizer))
    with open(corpus, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    print(
        "whole-word masking units in tokens (mean, p99, max, share of tokens in units > 10) "
        "of Han/Kana/Thai text and of words (spaced scripts: the English, the Latin names)"
    )
    print(f"lang  docs  tok/char   unk | {'unspaced-script units':^21} | {'words':^21}")
    for lang in LANGS:
        texts = [r["text"] for r in rows if r["lang"] == lang]
        encodings = tokenizer.encode_batch(texts)
        unk, per_char = bench_languages.coverage(tokenizer, encodings, texts)
        stats = [
            bench_languages.unit_stats(lengths)
            for lengths in bench_languages.unit_lengths(encodings, texts, tables)
        ]
        print(
            f"{lang:4} {len(texts):5d}  {per_char:8.3f} {100 * unk:5.2f}% | {stats[0]} | {stats[1]}"
        )
    if run_dir:
        with open(f"{run_dir}/metrics.json", encoding="utf-8") as f:
            print("final metrics:", json.dumps(json.load(f)))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    corpus = commands.add_parser("corpus")
    corpus.add_argument("--output", required=True)
    corpus.add_argument("--chars", type=int, default=250_000, help="characters per language")
    summary = commands.add_parser("report")
    summary.add_argument("--corpus", required=True)
    summary.add_argument("--tokenizer", required=True)
    summary.add_argument("--run_dir")
    args = parser.parse_args(argv)
    if args.command == "corpus":
        write_corpus(args.output, args.chars)
    else:
        report(args.corpus, args.tokenizer, args.run_dir)


if __name__ == "__main__":
    main()
