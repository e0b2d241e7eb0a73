"""Per-token tables of where words start, for whole-word masking: which token ids begin a
word (`word_starts`), how a token ends and whether it begins inside a character
(`unit_tables`: a run glued to a script written without spaces), and the word starts of a
sequence with them (`starts_in`). Read from a tokenizer's model and pre-tokenizer; a word
is what `common.word_units` calls one.
"""

from __future__ import annotations

import functools
import json

import numpy as np

from common import tokenizer_files, word_units


def word_starts(tokenizer, unspaced_units: bool = True) -> list[bool]:
    """Per token id, whether the token begins a word: the table whole-word masking needs.

    A word is what the tokenizer's pre-tokenizer splits on: a continuation piece is, for
    WordPiece, one with the `##` prefix (a WordLevel token is always a whole word); for
    byte-level BPE one without the leading-space mark `Ġ` and not a line break (`Ċ`, which
    has no mark on the word after it, starts a word); for Metaspace (unigram) one without
    `▁`. Special tokens count as starts.

    Scripts written without spaces (Chinese, Japanese, Thai, ...) have no such marks inside
    a sentence, so a "word" would be a whole clause. With `unspaced_units` a piece whose text
    (mark removed; byte-level pieces decoded to bytes) begins a unit of such a script
    (`word_units.starts_unit`: a Han or Kana character, a Thai consonant, not a combining
    mark) also starts a word, so their words are the units `word_units.units` defines. A
    byte-level piece that holds only the first bytes of a character starts a word when every
    character those bytes can begin starts a unit; one that begins mid-character continues.
    Pieces of spaced scripts are untouched: an English vocabulary's table is the same.
    What follows a unit (a Latin word glued to Chinese) needs the token before it:
    `unit_tables`.
    """
    prefix, is_start_when_prefixed, byte_level = _convention(tokenizer)
    table = [False] * tokenizer.get_vocab_size()
    special = _special_tokens(tokenizer)
    for token, token_id in tokenizer.get_vocab(with_added_tokens=True).items():
        if token_id < len(table):
            table[token_id] = (
                token in special
                or token.startswith(prefix) == is_start_when_prefixed
                or byte_level
                and token[:1] in _BYTE_LEVEL_BREAKS
                or unspaced_units
                and _starts_unit(token, prefix, byte_level)
            )
    return table


# How a token ends, for the token after it (`unit_tables`): in no unit of an unspaced script,
# with a whole one, inside the bytes of a character that can only be one (byte-level), or
# with continuation bytes only (it ends whatever character the tokens before it began).
ENDS_OTHER, ENDS_UNIT, ENDS_INSIDE_UNIT, ENDS_CONTINUATION = 0, 1, 2, 3


def unit_tables(tokenizer) -> tuple[list[int], list[bool]]:
    """Per token id, `(unit_ends, mid_character)`: how the token ends (`ENDS_*`: a unit of an
    unspaced script per `word_units.ends_unit`, or, byte-level, the first bytes of a
    character that can only be one, or continuation bytes only), and whether it begins
    inside a character (a UTF-8 continuation byte, or first bytes that could begin a
    combining mark) or with a combining mark. The token after a unit starts a word unless
    it is mid-character: in `文件foo.txt` or `有用的FILTER-OPTION` the Latin run is a word
    of its own, as `word_units.units` has it, not the tail of the Han character before it
    (`starts_in`). Special tokens end no unit and continue none."""
    prefix, _, byte_level = _convention(tokenizer)
    size = tokenizer.get_vocab_size()
    ends, mid = [ENDS_OTHER] * size, [False] * size
    special = _special_tokens(tokenizer)
    for token, token_id in tokenizer.get_vocab(with_added_tokens=True).items():
        if token_id >= size or token in special:
            continue
        text = token[len(prefix) :] if prefix and token.startswith(prefix) else token
        data = _byte_level_bytes(text) if byte_level else None
        if data is None:
            ends[token_id] = ENDS_UNIT if word_units.ends_unit(text) else ENDS_OTHER
            mid[token_id] = word_units.starts_with_mark(text)
        else:
            ends[token_id], mid[token_id] = _bytes_end(data), _bytes_mid_character(data)
    return ends, mid


def starts_in(ids, starts, unit_ends=(), mid_character=()) -> list[bool]:
    """Where words start in a sequence of token ids, with the tables above: what whole-word
    masking computes inside the compiled step (`trainer.data.masking._word_starts`, the same
    steps), for benchmarks and tests. A token starts a word if its table says so, or if it
    follows the end of a unit and is not mid-character; continuation bytes end the unit
    whose first bytes came before them (up to 3 tokens back: a character's last bytes)."""
    ids = np.asarray(ids)
    out = np.asarray(starts, bool)[ids]
    if len(unit_ends):
        code = np.asarray(unit_ends, np.int32)[ids]
        tail, inside = code == ENDS_CONTINUATION, code == ENDS_INSIDE_UNIT
        in_unit = inside
        for _ in range(3):
            in_unit = inside | tail & _after(in_unit)
        ends = (code == ENDS_UNIT) | tail & _after(in_unit)
        out = out | _after(ends) & ~np.asarray(mid_character, bool)[ids]
    return out.tolist()


def _after(flags):
    """Each position gets the flag of the one before it (False at the start)."""
    return np.concatenate([np.zeros_like(flags[..., :1]), flags[..., :-1]], axis=-1)


def _special_tokens(tokenizer) -> set:
    return {
        token.content for token in tokenizer.get_added_tokens_decoder().values() if token.special
    }


def _convention(tokenizer) -> tuple[str, bool, bool]:
    """(the mark, whether a marked piece starts a word, whether pieces are byte-level)."""
    spec = json.loads(tokenizer.to_str())
    model = spec.get("model") or {}
    kinds = _component_types(spec.get("pre_tokenizer")) | _component_types(spec.get("decoder"))
    if model.get("type") == "WordLevel":
        return "", True, False  # every token is a whole word
    if model.get("type") == "WordPiece":  # a word's later pieces carry the prefix
        return model.get("continuing_subword_prefix") or "##", False, False
    if "ByteLevel" in kinds:  # a word's first piece carries the space mark
        return "\u0120", True, True
    if "Metaspace" in kinds:
        return "\u2581", True, False
    raise tokenizer_files.TokenizerFilesError(
        f"cannot tell where words start for a {model.get('type')} tokenizer with "
        f"{sorted(kinds) or 'no'} pre-tokenizer/decoder; use --masking token or span."
    )


# Byte-level BPE marks a space before a word (`Ġ`) but keeps a newline, tab or carriage return
# as its own piece (`Ċ`, `ĉ`, `č`) with no mark on the word after it: such a piece starts a
# word, or the line's first word would continue the previous line's last one.
_BYTE_LEVEL_BREAKS = frozenset("\u010a\u0109\u010d\u010b\u010c")


def _starts_unit(token: str, prefix: str, byte_level: bool) -> bool:
    """Whether a piece's text (its mark removed) begins a unit of an unspaced script."""
    text = token[len(prefix) :] if prefix and token.startswith(prefix) else token
    if not byte_level:
        return word_units.starts_unit(text)
    data = _byte_level_bytes(text)
    return word_units.starts_unit(text) if data is None else _bytes_start_unit(data)


@functools.lru_cache(maxsize=1)
def _byte_level_decoding() -> dict:
    """The byte-level alphabet (GPT-2's: printable bytes stand for themselves, the other
    bytes for the characters from U+0100 on, in order) back to bytes."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    alphabet = {chr(b): b for b in printable}
    alphabet.update({chr(0x100 + i): b for i, b in enumerate(others)})
    return alphabet


def _byte_level_bytes(text: str) -> bytes | None:
    """A byte-level piece's bytes, or None for a token outside the alphabet (an added one)."""
    alphabet = _byte_level_decoding()
    if not text or any(c not in alphabet for c in text):
        return None
    return bytes(alphabet[c] for c in text)


def _bytes_end(data: bytes) -> int:
    """How UTF-8 bytes end (`ENDS_*`)."""
    lead = next((j for j in range(len(data) - 1, -1, -1) if data[j] & 0xC0 != 0x80), None)
    if lead is None:
        return ENDS_CONTINUATION
    first = data[lead]
    size = 1 if first < 0x80 else 2 if first < 0xE0 else 3 if first < 0xF0 else 4
    if len(data) - lead < size:  # cut inside its last character
        return ENDS_INSIDE_UNIT if _prefix_in_unit(data[lead:], size) else ENDS_OTHER
    unit = word_units.ends_unit(data.decode("utf-8", errors="ignore"))
    return ENDS_UNIT if unit else ENDS_OTHER


def _code_points_from(head: bytes, size: int) -> range | None:
    """The code points whose `size`-byte UTF-8 form begins with `head` (None: no character
    does)."""
    missing = size - len(head)
    try:
        low = ord((head + b"\x80" * missing).decode("utf-8"))
        high = ord((head + b"\xbf" * missing).decode("utf-8"))
    except UnicodeDecodeError:
        return None
    return range(low, high + 1)


@functools.cache
def _prefix_in_unit(head: bytes, size: int) -> bool:
    """Every character whose UTF-8 form begins with `head` is a unit character (or mark)."""
    points = _code_points_from(head, size)
    return points is not None and all(word_units.ends_unit(chr(c)) for c in points)


def _bytes_mid_character(data: bytes) -> bool:
    """Whether UTF-8 bytes begin inside a character, with a combining mark, or with the first
    bytes of a character that could be one."""
    lead = data[0]
    if lead & 0xC0 == 0x80:
        return True
    size = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    if len(data) >= size:
        return word_units.starts_with_mark(data[:size].decode("utf-8", errors="ignore"))
    points = _code_points_from(data, size)
    return points is not None and word_units.marks_between(points.start, points.stop - 1)


def _bytes_start_unit(data: bytes) -> bool:
    """Whether UTF-8 bytes begin a unit: their first character does, or, cut short, every
    character its first bytes can begin does. Bytes that begin mid-character (a
    continuation byte) or with ASCII do not."""
    lead = data[0]
    if lead < 0xC0 or lead >= 0xF8:
        return False  # ASCII, a continuation byte, or no UTF-8 lead byte
    size = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    return _prefix_starts_unit(data[:size], size)


@functools.cache
def _prefix_starts_unit(head: bytes, size: int) -> bool:
    """Every character whose UTF-8 form begins with `head` starts a unit (the characters
    with a given prefix are a contiguous range of code points)."""
    missing = size - len(head)
    try:
        low = ord((head + b"\x80" * missing).decode("utf-8"))
        high = ord((head + b"\xbf" * missing).decode("utf-8"))
    except UnicodeDecodeError:  # not valid UTF-8 (overlong, a surrogate, past U+10FFFF)
        return False
    return all(word_units.starts_unit(chr(c)) for c in range(low, high + 1))


def _component_types(node) -> set:
    """The `type` names in a (possibly nested `Sequence`) tokenizer component."""
    found = set()
    if isinstance(node, dict):
        found.update([node["type"]] if isinstance(node.get("type"), str) else [])
        node = list(node.values())
    if isinstance(node, list):
        for value in node:
            found |= _component_types(value)
    return found
