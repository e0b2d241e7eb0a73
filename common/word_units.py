"""What a "word" is, in every script: the unit that the quality rules count, near-dedup
shingles are made of and whole-word masking keeps together.

- Scripts written with spaces (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Hangul,
  ...): a word is a run of characters between whitespace, punctuation attached, exactly
  `str.split()`.
- Scripts written without spaces, where whitespace separates clauses or nothing at all:
  every character is its own unit (BERT's convention for Han, which Chinese BERT and BERT's
  multilingual model use), a base character together with the combining marks that follow
  it (Thai, Lao, Khmer and Myanmar vowel signs and tone marks sit on their consonant). These
  are Han (with its iteration mark), Hiragana, Katakana (full and half width), Bopomofo,
  Thai, Lao, Khmer, Myanmar and Tibetan, plus the CJK punctuation and full-width forms
  written among them, so that `。` or `（` is a unit of its own rather than glued to a word.
- Mixed text (Japanese with English terms) mixes both: `"Python版の使い方"` is
  `["Python", "版", "の", "使", "い", "方"]`.

A real word segmenter (jieba, MeCab, PyThaiNLP) would give longer units for these scripts;
the character rule needs no model and no dictionary, is what Chinese BERT used, and every
measure below is defined so that it holds with it (docs/languages.md has the figures).

Example:
    >>> units("Unicode 文字列を処理する。")
    ['Unicode', '文', '字', '列', 'を', '処', '理', 'す', 'る', '。']
    >>> units("a plain English text")
    ['a', 'plain', 'English', 'text']
"""

from __future__ import annotations

import itertools
import re

# Characters that are units of their own (ranges of code points, inclusive).
_UNIT_RANGES = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x0F00, 0x0FFF),  # Tibetan (syllables are split by a tsheg, words by nothing)
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer symbols
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3001, 0x303F),  # CJK symbols and punctuation (U+3000, the ideographic space, is a space)
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x31A0, 0x31FF),  # Bopomofo extended, CJK strokes, Katakana phonetic extensions
    (0x3400, 0x4DBF),  # Han extension A
    (0x4E00, 0x9FFF),  # Han
    (0xF900, 0xFAFF),  # Han compatibility
    (0xFE30, 0xFE4F),  # CJK compatibility forms
    (0xFF01, 0xFF65),  # full-width ASCII forms and half-width CJK punctuation
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x1AFF0, 0x1B16F),  # Kana extensions
    (0x20000, 0x323AF),  # Han extensions B to H
)
# Combining marks that stay with the character before them.
_MARK_RANGES = (
    (0x0E31, 0x0E31),
    (0x0E34, 0x0E3A),
    (0x0E47, 0x0E4E),  # Thai
    (0x0EB1, 0x0EB1),
    (0x0EB4, 0x0EBC),
    (0x0EC8, 0x0ECE),  # Lao
    (0x0F18, 0x0F19),
    (0x0F71, 0x0F84),
    (0x0F86, 0x0F87),
    (0x0F8D, 0x0FBC),  # Tibetan
    (0x102B, 0x103E),
    (0x1056, 0x1059),
    (0x105E, 0x1060),
    (0x1062, 0x1064),  # Myanmar
    (0x1067, 0x106D),
    (0x1071, 0x1074),
    (0x1082, 0x108D),
    (0x108F, 0x108F),
    (0x109A, 0x109D),
    (0x17B4, 0x17D3),
    (0x17DD, 0x17DD),  # Khmer
    (0x3099, 0x309A),  # combining kana voicing marks
    (0x0300, 0x036F),  # generic combining diacritics
    (0x200C, 0x200D),  # zero-width (non-)joiners
    (0xFE00, 0xFE0F),
    (0xE0100, 0xE01EF),  # variation selectors (Han glyph variants)
)


def _class(ranges) -> str:
    return "".join(
        f"{re.escape(chr(a))}-{re.escape(chr(b))}" if a != b else re.escape(chr(a))
        for a, b in ranges
    )


_UNIT, _MARK = _class(_UNIT_RANGES), _class(_MARK_RANGES)
_HAS_UNIT = re.compile(f"[{_UNIT}]")
_UNITS = re.compile(f"[{_UNIT}][{_MARK}]*|[^\\s{_UNIT}]+")
_STARTS_UNIT = re.compile(f"(?![{_MARK}])[{_UNIT}]")
_ENDS_UNIT = re.compile(f"[{_UNIT}][{_MARK}]*\\Z")
_STARTS_MARK = re.compile(f"[{_MARK}]")


def has_unspaced(text: str) -> bool:
    """Whether `text` holds a character of a script written without spaces."""
    return _HAS_UNIT.search(text) is not None


def units(text: str) -> list[str]:
    """The word units of `text`, in order (see the module docstring). Text with no character
    of an unspaced script takes the fast path and gives exactly `text.split()`."""
    if _HAS_UNIT.search(text) is None:
        return text.split()
    return _UNITS.findall(text)


_SPACED_WORD = re.compile(r"\S+")


def count_units(text: str, stop: int) -> int:
    """`min(len(units(text)), stop)`, holding no unit list: a huge text costs the time of one
    scan and the memory of `stop` units."""
    pattern = _UNITS if _HAS_UNIT.search(text) else _SPACED_WORD
    return sum(1 for _ in itertools.islice(pattern.finditer(text), stop))


def is_spaced_word(unit: str) -> bool:
    """Whether a unit (from `units`) is a word of a spaced script, rather than one character
    (cluster) of an unspaced one."""
    return _HAS_UNIT.match(unit) is None


def starts_unit(piece: str) -> bool:
    """Whether a tokenizer piece (its space or continuation mark already removed) begins a
    unit of an unspaced script, so that whole-word masking starts a word there: its first
    character is a unit character and not a combining mark."""
    return _STARTS_UNIT.match(piece) is not None


def ends_unit(piece: str) -> bool:
    """Whether a tokenizer piece ends with a unit of an unspaced script (a character with
    its marks), so that whatever follows it, a Latin word glued to Chinese included
    (`"版Python"`), begins a unit of its own unless it is a further mark."""
    return _ENDS_UNIT.search(piece) is not None


def starts_with_mark(piece: str) -> bool:
    """Whether a piece begins with a combining mark, which stays with the unit before it."""
    return _STARTS_MARK.match(piece) is not None


def marks_between(low: int, high: int) -> bool:
    """Whether a combining mark lies among the code points low..high."""
    return any(a <= high and low <= b for a, b in _MARK_RANGES)
