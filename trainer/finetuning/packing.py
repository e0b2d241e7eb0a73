"""Texts to model inputs with our tokenizer files, packed the way each family pretrains.

keras-hub's tokenizer classes cannot read our unigram or WordPiece `tokenizer.json`, so the
text is tokenized on the host with `tokenizers` (no special tokens added by its post-processor)
and packed here:

- RoBERTa: `<s> a </s>` and, for a pair, `<s> a </s></s> b </s>` (fairseq's and keras-hub's
  RobertaTextClassifierPreprocessor's layout); no segment ids.
- BERT: `[CLS] a [SEP]` and `[CLS] a [SEP] b [SEP]`, segment ids 0 up to the first `[SEP]`,
  1 after it.

The start and separator tokens are the tokenizer's own `cls_token` and `sep_token`. A text
too long for `max_length` is cut, the longer of the two texts first (transformers'
`longest_first`), and counted. Arrays are plain numpy, padded on the right (the position ids
pretraining used), to one length: the longest packed example of all splits.

Example:
    >>> packer = Packer(tokenizer, info, source.family, max_length=128)  # a Family
    >>> packed = packer.pack(["a text"], ["its pair"])
    >>> packed.features(16, info.pad_id, with_segments=False)["token_ids"].shape
    (1, 16)
    >>> packed.truncated
    0
"""

from __future__ import annotations

import dataclasses

import numpy as np

from common import tokenizer_files
from trainer.families.family import Family


@dataclasses.dataclass
class Packed:
    """Ids of one split before padding, and how many examples were cut."""

    rows: list  # token ids per example
    segments: list  # segment ids per example
    truncated: int

    def features(self, length: int, pad_id: int, with_segments: bool) -> dict:
        """The keras-hub backbone's input dict, right-padded to `length`."""
        count = len(self.rows)
        token_ids = np.full((count, length), pad_id, np.int32)
        padding_mask = np.zeros((count, length), np.int32)
        segment_ids = np.zeros((count, length), np.int32)
        for i, (row, segments) in enumerate(zip(self.rows, self.segments)):
            token_ids[i, : len(row)] = row
            padding_mask[i, : len(row)] = 1
            segment_ids[i, : len(row)] = segments
        features = {"token_ids": token_ids, "padding_mask": padding_mask}
        if with_segments:
            features["segment_ids"] = segment_ids
        return features


def truncate_pair(first: list, second: list | None, budget: int) -> tuple[list, list | None]:
    """Both texts cut to fit `budget` as `tokenizers`' LongestFirst cuts them (what
    transformers' tokenizers and sentence-transformers' CrossEncoder do): the longer text loses
    tokens until both fit; where both must be cut, the shorter keeps half the budget and the
    longer the rest (the odd token)."""
    if second is None:
        return list(first[:budget]), None
    swap = len(first) > len(second)
    short, long_ = sorted((len(first), len(second)))
    long_ = short if short > budget else max(short, budget - short)
    if short + long_ > budget:
        short = budget // 2
        long_ = short + budget % 2
    keep_first, keep_second = (long_, short) if swap else (short, long_)
    return list(first[:keep_first]), list(second[:keep_second])


class Packer:
    """Tokenizes and packs texts for one family and maximum length."""

    def __init__(self, tokenizer, info, family: Family, max_length: int):
        self.tokenizer = tokenizer_files.text_only(tokenizer)  # text is text: no control ids
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.family = family
        # Separators between the texts of a pair (two in RoBERTa, one in BERT): read once.
        self.pair_separators = family.pair_separators
        self.max_length = max_length
        self.cls_id = info.special_token_ids["cls_token"]
        self.sep_id = info.special_token_ids["sep_token"]

    def specials(self, is_pair: bool) -> int:
        """Special tokens per example: a start and an end, and the family's separators
        between the texts of a pair (two in RoBERTa, one in BERT)."""
        if not is_pair:
            return 2
        return 2 + self.pair_separators

    def _encode(self, texts) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def pack(self, texts, pairs=None) -> Packed:
        firsts = self._encode(texts)
        seconds = self._encode(pairs) if pairs is not None else [None] * len(firsts)
        budget = self.max_length - self.specials(pairs is not None)
        packed = Packed([], [], 0)
        for first, second in zip(firsts, seconds):
            cut_first, cut_second = truncate_pair(first, second, budget)
            packed.truncated += (len(cut_first), len(cut_second or [])) != (
                len(first),
                len(second or []),
            )
            row, segments = self._join(cut_first, cut_second)
            packed.rows.append(row)
            packed.segments.append(segments)
        return packed

    def _join(self, first: list, second: list | None) -> tuple[list, list]:
        row = [self.cls_id, *first, self.sep_id]
        if second is None:
            return row, [0] * len(row)
        middle = [self.sep_id] * (self.pair_separators - 1)
        tail = [*middle, *second, self.sep_id]
        return row + tail, [0] * len(row) + [1] * len(tail)


def framing(source):
    """(first, second text) -> (ids, segment ids) as the model reads a pair, uncut: what an
    exported tokenizer must give (`trainer.release.cross_encoder_export.write_tokenizer`)."""
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    packer = Packer(tokenizer, info, source.family, 1 << 30)

    def frame(first: str, second: str) -> tuple[list, list]:
        packed = packer.pack([first], [second])
        return packed.rows[0], packed.segments[0]

    return frame
