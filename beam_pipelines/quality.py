"""Quality rules for documents, in the spirit of Gopher's and C4's heuristics: pure functions
of a document's text that name the first rule it fails, or None.

The rules, Gopher's values (Rae et al. 2021, "Scaling Language Models: Methods, Analysis &
Insights from Training Gopher", appendix A, the MassiveText quality filters; C4, Raffel et
al. 2020, is in the same spirit) and ours. Gopher's values were set for web pages of 50+
words; on docstrings (the demo corpus, where a real 30-word docstring may repeat one phrase
twice) they drop 579 of 12,736 documents, so our defaults are looser, set where no real
document of the demo corpus is lost to more than a handful, and still far from what the
degenerate documents they aim at score (a page of one repeated line: ~1.0 duplicate-line
characters; a log of one repeated word: ~1.0 top 2-gram share; a blob of one character:
one giant word, or symbols only):

- min_words: fewer whitespace-separated words. Gopher 50, C4 3 sentences; ours 5 (the demo
  corpus has none under 11; drops titles, stray fragments, lone tokens).
- mean_word_length: mean length of those words outside [3, 10] (Gopher); ours [3, 20]:
  docstrings full of dotted names and URLs reach 15-23 (10 drops 128 demo docstrings).
- non_alnum_fraction: the share of non-whitespace characters that are neither letters nor
  digits. Gopher bounds the symbol-to-word ratio ('#', '...') at 0.1, which drops code
  examples (`>>> f(x)[0]`); ours bounds all symbols at 0.6 (demo p99.9: 0.41).
- duplicate_line_chars: the share of the characters of non-blank lines (compared stripped)
  that lie in repeats of an earlier line. Gopher 0.2 (46 demo docstrings: "-------"
  underlines, repeated parameter lines); ours 0.4.
- top_{2,3,4}gram: the most frequent word n-gram, counted at each of its occurrences (and
  only when it occurs twice or more), covers this share of all words' characters. Gopher
  0.20 / 0.18 / 0.16 (drop 72 / 172 / 304 demo docstrings); ours 0.40 / 0.38 / 0.36.

Every threshold is a prepare flag of the same name. Each check is one pass over the text or
its words (linear; ~1.4 s for the 11 M characters of the demo corpus), no regular expression.

Memory per document is bounded: the rules hold every word (one Python string per Han or Kana
character) and every n-gram of the text they judge, ~17 bytes per byte of English and ~39 of
Chinese, so a document over JUDGED_CHARS characters is judged on `sample(text)`, WINDOWS
evenly spaced windows of it (min_words alone is counted on the whole text, in one scan that
holds nothing). Every rule measures a share or a repeat, which an even sample keeps: a
degenerate document is degenerate in each window. Documents up to JUDGED_CHARS characters are
judged whole, as before.

Example:
    >>> failing_rule("word " * 100, QualityConfig())
    'top_2gram'
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import NamedTuple

from common import word_units
from common.flags import flag

# Documents longer than this (in characters) are judged on a sample of this size.
JUDGED_CHARS = 1 << 18
WINDOWS = 16

FILTERS = ("none", "basic")  # the values of --quality_filter; basic: the RULES below
RULES = (
    "min_words",
    "mean_word_length",
    "non_alnum_fraction",
    "duplicate_line_chars",
    "top_2gram",
    "top_3gram",
    "top_4gram",
)


@dataclasses.dataclass(frozen=True)
class QualityConfig:
    """The thresholds of `--quality_filter basic` (each one a prepare flag)."""

    min_words: int = flag("quality filter: fewer words drop a document (Gopher: 50)", 5, minimum=0)
    min_mean_word_length: float = flag(
        "quality filter: lower bound of the mean word length (Gopher: 3)", 3.0, minimum=0
    )
    max_mean_word_length: float = flag(
        "quality filter: upper bound of the mean word length (Gopher: 10)", 20.0
    )
    max_non_alnum_fraction: float = flag(
        "quality filter: largest share of non-whitespace characters that are not letters or digits",
        0.6,
        minimum=0,
        maximum=1,
    )
    max_duplicate_line_chars: float = flag(
        "quality filter: largest share of characters in "
        "lines that repeat an earlier line (Gopher: 0.2)",
        0.4,
        minimum=0,
        maximum=1,
    )
    max_top_2gram_fraction: float = flag(
        "quality filter: largest share of characters in the "
        "most frequent word 2-gram (Gopher: 0.20)",
        0.40,
        minimum=0,
        maximum=1,
    )
    max_top_3gram_fraction: float = flag(
        "quality filter: the same for 3-grams (Gopher: 0.18)", 0.38, minimum=0, maximum=1
    )
    max_top_4gram_fraction: float = flag(
        "quality filter: the same for 4-grams (Gopher: 0.16)", 0.36, minimum=0, maximum=1
    )

    def top_ngram_limits(self) -> tuple:
        return (
            (2, self.max_top_2gram_fraction),
            (3, self.max_top_3gram_fraction),
            (4, self.max_top_4gram_fraction),
        )


class Failure(NamedTuple):
    rule: str  # one of RULES
    value: float  # what was measured
    limit: str  # the bound it broke, e.g. "< 5"

    def reason(self) -> str:
        return f"{self.rule}: {self.value:.3g} {self.limit}"


def duplicate_line_chars(text: str) -> float:
    """Share of the characters of non-blank lines that lie in repeats of an earlier line."""
    seen, total, repeated = set(), 0, 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        total += len(line)
        if line in seen:
            repeated += len(line)
        else:
            seen.add(line)
    return repeated / total if total else 0.0


def top_ngram_fraction(words: list, n: int, total_chars: int) -> float:
    """Characters of the most frequent word n-gram times its count, over all words'
    characters (0 when no n-gram occurs twice: a single occurrence says nothing). Counted
    at every occurrence, overlapping ones too; capped at 1 (one word
    repeated scores ~2 uncapped)."""
    if len(words) < n + 1 or not total_chars:
        return 0.0
    grams = Counter(zip(*(words[i:] for i in range(n))))
    gram, count = grams.most_common(1)[0]
    return min(1.0, count * sum(map(len, gram)) / total_chars) if count > 1 else 0.0


_HANGUL = re.compile("[\uac00-\ud7a3]")


def word_letters(words: list) -> int:
    """Letters of `words`: a Hangul syllable counts as the 2 or 3 letters (jamo) it is
    written with, so that Korean words measure like the words of alphabets (a Korean word
    of 3 syllables is ~7 letters; counted as 3, real Korean prose averaged 2.5 and failed
    the lower bound)."""
    letters = sum(map(len, words))
    for word in words:
        if not word.isascii():
            letters += sum(1 + ((ord(c) - 0xAC00) % 28 != 0) for c in _HANGUL.findall(word))
    return letters


def sample(text: str) -> str:
    """`text` up to JUDGED_CHARS characters; a longer one's WINDOWS evenly spaced windows
    (the first at its start, the last at its end) of JUDGED_CHARS // WINDOWS characters."""
    if len(text) <= JUDGED_CHARS:
        return text
    width = JUDGED_CHARS // WINDOWS
    step = (len(text) - width) / (WINDOWS - 1)
    parts = []
    for i in range(WINDOWS):
        piece, joint = _trimmed(text, round(i * step), width)
        parts += [joint, piece] if parts else [piece]
    return "".join(parts)


def _trimmed(text: str, start: int, width: int) -> tuple[str, str]:
    """The window at `start`, trimmed to whole lines, joined to the one before by a line end;
    inside one long line, to whole words, joined by a space (windows of one line are not
    separate lines: they would look like repeats of it); inside one word, untrimmed and
    unjoined."""
    window = text[start : start + width]
    for end in ("\n", " "):
        first, last = window.find(end), window.rfind(end)
        head = first + 1 if start > 0 else 0  # inside a line (a word): from the next one
        tail = last if start + width < len(text) else len(window)
        if first >= 0 and head < tail:
            return window[head:tail], end
    return window, ""


class _Judged(NamedTuple):
    """What the rules measure: the (sampled) text, its word units and their characters."""

    text: str
    words: list
    chars: int  # the non-whitespace characters


def _min_words(doc: _Judged, cfg: QualityConfig) -> Failure | None:
    if len(doc.words) < cfg.min_words:
        return Failure("min_words", len(doc.words), f"< {cfg.min_words}")
    return None


def _mean_word_length(doc: _Judged, cfg: QualityConfig) -> Failure | None:
    """Judged only on a text mostly of a spaced script: only its words have a length."""
    spaced = doc.words
    if word_units.has_unspaced(doc.text):
        spaced = [w for w in doc.words if word_units.is_spaced_word(w)]
    if 2 * len(spaced) < len(doc.words):
        return None
    if _HANGUL.search(doc.text):
        letters = word_letters(spaced)
    else:
        letters = doc.chars if spaced is doc.words else sum(map(len, spaced))
    mean = letters / len(spaced)
    if cfg.min_mean_word_length <= mean <= cfg.max_mean_word_length:
        return None
    bounds = f"[{cfg.min_mean_word_length:g}, {cfg.max_mean_word_length:g}]"
    return Failure("mean_word_length", mean, f"outside {bounds}")


def _non_alnum_fraction(doc: _Judged, cfg: QualityConfig) -> Failure | None:
    symbols = 1 - sum(map(str.isalnum, doc.text)) / doc.chars
    if symbols > cfg.max_non_alnum_fraction:
        return Failure("non_alnum_fraction", symbols, f"> {cfg.max_non_alnum_fraction:g}")
    return None


def _duplicate_line_chars(doc: _Judged, cfg: QualityConfig) -> Failure | None:
    duplicated = duplicate_line_chars(doc.text)
    if duplicated > cfg.max_duplicate_line_chars:
        return Failure("duplicate_line_chars", duplicated, f"> {cfg.max_duplicate_line_chars:g}")
    return None


def _top_ngrams(doc: _Judged, cfg: QualityConfig) -> Failure | None:
    for n, limit in cfg.top_ngram_limits():
        top = top_ngram_fraction(doc.words, n, doc.chars)
        if top > limit:
            return Failure(f"top_{n}gram", top, f"> {limit:g}")
    return None


# The checks in RULES order (cheapest first); each names the first rule of its own it fails.
_CHECKS = (_min_words, _mean_word_length, _non_alnum_fraction, _duplicate_line_chars, _top_ngrams)


def first_failure(text: str, cfg: QualityConfig) -> Failure | None:
    """The first rule (in RULES order: cheapest first) that `text` fails, or None.
    Empty or blank documents pass: they are counted as empty by the tokenizing step.
    Words are `common.word_units.units`: one unit per character in scripts written
    without spaces. A document over JUDGED_CHARS characters is judged on `sample(text)`."""
    if len(text) > JUDGED_CHARS:
        count = word_units.count_units(text, cfg.min_words)
        if count < cfg.min_words:  # a few giant words: judged whole, holding nothing
            return Failure("min_words", count, f"< {cfg.min_words}") if count else None
        text = sample(text)
    words = word_units.units(text)
    if not words:
        return None
    doc = _Judged(text, words, sum(map(len, words)))
    for check in _CHECKS:
        failure = check(doc, cfg)
        if failure is not None:
            return failure
    return None


def failing_rule(text: str, cfg: QualityConfig) -> str | None:
    """The name of the first rule `text` fails, or None when it passes them all."""
    failure = first_failure(text, cfg)
    return failure.rule if failure else None
