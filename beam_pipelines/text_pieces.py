"""Long documents cut into pieces that tokenize to the same token stream as the whole.

The fast tokenizer's working memory grows with the text it is handed, ~150 bytes per byte
for one document (the normalizer's byte alignments, then every token's string, offsets and
ids, all alive at once): a 9.5 MB line took 1.2-1.6 GB. Rows are concatenations of the
token stream anyway, so a document over `PIECE_CHARS` characters is tokenized in pieces of
about that size and its ids joined, the special tokens of the whole (`<s> ... </s>`) put
around them once.

A cut goes where no tokenizer component joins the text on its two sides: at the first
character of a run of whitespace (the left piece ends with a non-whitespace character, the
right one begins with the whole run). Pre-tokenizers split there (Metaspace's `▁`, the
byte-level regex, BERT's), so every pre-token, hence every token, is the same as in the
whole text; normalizers that work character by character (NFC/NFKC, lowercase, BERT's) or
collapse whitespace runs (`Replace(\\s+, " ")`) give the same text on each side. Where a
component could join across (a custom `Split` or `Replace` pattern, `Strip`, `Prepend`, a
sentencepiece `Precompiled` map, a pre-tokenizer that does not split at whitespace, BPE
dropout), `Cutter.of` returns None and documents are tokenized whole, as before.
`tests/beam_pipelines/test_text_pieces.py` checks the identity on long documents.

A run of text with no whitespace at all (a line of Chinese or Japanese) cannot be cut: it
stays one piece, however long.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator

PIECE_CHARS = 1 << 16  # measured: pieces of 50-65 k characters add nothing to peak RSS

# Normalizers that map each character on its own (or drop it), so text on one side of a
# cut never changes what the other side becomes.
_PER_CHARACTER = {
    "NFC",
    "NFD",
    "NFKC",
    "NFKD",
    "Lowercase",
    "StripAccents",
    "BertNormalizer",
    "Nmt",
}
# Replace patterns that only rewrite whole whitespace runs, which a cut never splits.
_WHITESPACE_RUNS = {r"\s+", " {2,}"}
# Pre-tokenizers that split at whitespace, and ones that only split further.
_SPLITTERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
_FURTHER = {"Digits", "Punctuation", "UnicodeScripts"}
# Where a cut may go: a whitespace character (White_Space: Python's isspace without the
# separators U+001C-U+001F, which Rust's and Oniguruma's `\s` do not count) after a
# character that is no whitespace in either sense. `ANY` for tokenizers that treat every
# whitespace alike; `SPACE` where a piece that begins with other whitespace would get a
# prefix space of its own (Metaspace's prepend, ByteLevel's add_prefix_space).
_ANY, _SPACE = r"[^\S\x1c-\x1f]", " "


@dataclasses.dataclass(frozen=True)
class Cutter:
    """How to cut a tokenizer's documents: where (`cut_at`), the special ids it puts
    before and after a text (`prefix`, `suffix`), and added tokens whose presence in a
    document stops its cutting (`stoppers`: ones that strip whitespace to their right or
    hold whitespace, which a cut could take from them)."""

    cut_at: str
    prefix: tuple
    suffix: tuple
    stoppers: tuple = ()

    @staticmethod
    def of(tokenizer) -> Cutter | None:
        """The tokenizer's Cutter, or None when a cut could change its tokens."""
        spec = json.loads(tokenizer.to_str())
        if (spec.get("model") or {}).get("dropout"):
            return None
        whitespace_folded = _normalizer_ok(spec.get("normalizer"))
        if whitespace_folded is None:
            return None
        mode = _pre_tokenizer_mode(spec.get("pre_tokenizer"), whitespace_folded)
        around = _specials_around(tokenizer)
        stoppers = []
        for token in spec.get("added_tokens") or []:
            if token.get("rstrip") or any(c.isspace() for c in token["content"]):
                if token.get("normalized"):
                    return None  # matched on normalized text: a raw-text check misses it
                stoppers.append(token["content"])
        if mode is None or around is None:
            return None
        return Cutter(mode, *around, tuple(stoppers))

    def pieces(self, text: str, size: int = PIECE_CHARS) -> Iterator[str] | None:
        """The pieces of `text`, each up to `size` characters where whitespace allows, or
        None when it is not to be cut (short, or holding a stopper)."""
        if len(text) <= size or any(token in text for token in self.stoppers):
            return None
        return _cut(text, self.cut_at, size)


def _patterns(cut_at: str):
    # The last cut in a window: a greedy prefix backtracks from the window's end.
    return (re.compile(rf"(?s:.*)(?<!\s){cut_at}"), re.compile(rf"(?<!\s){cut_at}"))


def _cut(text: str, cut_at: str, size: int) -> Iterator[str]:
    last_in, next_after = _patterns(cut_at)
    start = 0
    while len(text) - start > size:
        found = last_in.match(text, start + 1, start + size + 1)
        end = found.end() - 1 if found else None
        if end is None:  # no whitespace in the window: the piece runs to the next cut
            later = next_after.search(text, start + size + 1)
            if later is None:
                break
            end = later.start()
        yield text[start:end]
        start = end
    yield text[start:]


def _components(node, key: str) -> list:
    if not node:
        return []
    if node.get("type") == "Sequence":
        return [c for child in node.get(key) or [] for c in _components(child, key)]
    return [node]


def _normalizer_ok(node) -> bool | None:
    """None if a normalizer could join text across a cut; else whether whitespace runs are
    folded to one space (so a piece never begins with other whitespace)."""
    folded = False
    for part in _components(node, "normalizers"):
        kind = part.get("type")
        if kind == "Replace":
            pattern = part.get("pattern") or {}
            if pattern.get("Regex") not in _WHITESPACE_RUNS:
                return None
            folded = folded or (pattern.get("Regex") == r"\s+" and part.get("content") == " ")
        elif kind not in _PER_CHARACTER:
            return None
    return folded


def _pre_tokenizer_mode(node, whitespace_folded: bool) -> str | None:
    """Where cuts may go for this pre-tokenizer (`_ANY`, `_SPACE`), None if nowhere."""
    splits, mode = False, _ANY
    for part in _components(node, "pretokenizers"):
        kind = part.get("type")
        if kind == "Metaspace":
            if not part.get("split", True):
                return None
            splits = True
            if part.get("prepend_scheme", "always") != "never" and not whitespace_folded:
                mode = _SPACE
        elif kind == "ByteLevel":
            splits = splits or part.get("use_regex", True)
            if part.get("add_prefix_space") and not whitespace_folded:
                mode = _SPACE
        elif kind in _SPLITTERS:
            splits = True
        elif kind not in _FURTHER:
            return None
    return mode if splits else None


_PROBES = ("a", "hello world", "1 2 3", "x\ny")


def _specials_around(tokenizer) -> tuple[tuple, tuple] | None:
    """(prefix, suffix): the ids the post-processor puts around every probe text, or None
    if it does anything else (the same for all probes, nothing inside)."""
    found = set()
    for probe in _PROBES:
        whole = tokenizer.encode(probe, add_special_tokens=True).ids
        body = tokenizer.encode(probe, add_special_tokens=False).ids
        starts = [
            k
            for k in range(len(whole) - len(body) + 1)
            if body and whole[k : k + len(body)] == body
        ]
        if not starts:
            return None
        k = starts[0]
        found.add((tuple(whole[:k]), tuple(whole[k + len(body) :])))
    return found.pop() if len(found) == 1 else None
