"""The quality filter per language: documents removed with the default rules on real
translated text the machine ships (benchmarks/system_texts.py), with whitespace words (the
rules before common/word_units.py) and with word units, side by side.

    python -m benchmarks.bench_quality [--langs zh,ja,th,ko,de,ru,nb]
"""

from __future__ import annotations

import argparse
import collections
import re
import time
from unittest import mock

from beam_pipelines import quality
from benchmarks import system_texts
from common import word_units
from tests.support import multilingual


def removed(docs: list, whitespace_words: bool) -> tuple[int, collections.Counter]:
    config = quality.QualityConfig()
    patches = []
    if whitespace_words:  # the rules as they were: str.split words, letters = characters
        patches = [
            mock.patch.object(word_units, "units", str.split),
            mock.patch.object(word_units, "has_unspaced", lambda text: False),
            mock.patch.object(quality, "_HANGUL", re.compile("(?!)")),
        ]
    for patch in patches:
        patch.start()
    try:
        rules = collections.Counter(
            f.rule for f in map(lambda d: quality.first_failure(d, config), docs) if f
        )
    finally:
        for patch in patches:
            patch.stop()
    return sum(rules.values()), rules


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--langs", default="zh,ja,th,ko,de,ru,nb")
    args = parser.parse_args(argv)
    print("| language | documents | removed before | after | top rules before | seconds after |")
    print("|---|---|---|---|---|---|")
    for lang in args.langs.split(","):
        docs = system_texts.documents(lang)
        if not docs:
            print(f"| {lang} | 0 (none on this machine) | | | | |")
            continue
        before, rules = removed(docs, whitespace_words=True)
        start = time.perf_counter()
        after, _ = removed(docs, whitespace_words=False)
        seconds = time.perf_counter() - start
        top = ", ".join(f"{rule} {n}" for rule, n in rules.most_common(2))
        print(
            f"| {lang} | {len(docs):,} | {100 * before / len(docs):.1f} % | "
            f"{100 * after / len(docs):.1f} % | {top} | {seconds:.2f} |"
        )
    print("\nPlain prose with no Latin words (tests/support/multilingual.py, 300 documents each):")
    for lang in multilingual.SENTENCES:
        docs = multilingual.documents(lang, 300)
        before, rules = removed(docs, whitespace_words=True)
        after, _ = removed(docs, whitespace_words=False)
        print(
            f"  {lang}: removed before {100 * before / len(docs):.1f} % "
            f"({dict(rules.most_common(2))}), after {100 * after / len(docs):.1f} %"
        )


if __name__ == "__main__":
    main()
