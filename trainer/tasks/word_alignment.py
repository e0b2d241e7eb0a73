"""Word-level labels onto word pieces: token ids of a sentence's words, and a label per token
(the word's label on its first sub-token, `IGNORED` on the other pieces and the special tokens).

The words are tokenized as running text, `" ".join(words)`, and each token is given to the
word its offsets fall in: so the model reads the ids it read in pretraining. `tokenizers`'
`encode(words, is_pretokenized=True)` does not give those ids for every kind of tokenizer: a
byte-level BPE (RoBERTa's, ours; `ByteLevel(add_prefix_space=False)`) then tokenizes every word
as if it began the text, without the space it has in running text ('German', not 'ĠGerman';
transformers' RobertaTokenizerFast hence requires `add_prefix_space=True` for pretokenized
input, which adds a space before the first word too). On running text, words 2..n carry their
space ('ĠGerman', '▁German') and the first word is as the tokenizer writes a text's first word
(no space for our BPE, '▁' for Metaspace); WordPiece has no space marker either way. Offsets
map back to words whatever the pre-tokenizer: a word owns its characters and the space before
it, so a piece holding only that space (Metaspace's lone '▁', BPE's 'Ġ') is the word's first.

Each sentence becomes `[cls] pieces [sep]`, the layout `packing.Packer` gives one text. A
sentence longer than `max_length` is cut and counted, with the words whose first piece fell
beyond it (`words_cut`); a word with no piece of its own (`words_without_tokens`: a piece
spanning two words) is counted too. Neither has a prediction: `word_predictions` gives them
`O`, and their gold tags stay, so a cut never raises a score.

Example:
    >>> aligner = WordAligner(tokenizer, info, max_length=128)   # common.tokenizer_files.load
    >>> aligned = aligner.align([["EU", "rejects", "German", "call"]], [[1, 0, 2, 0]])
    >>> aligned.sentences[0].labels          # [cls] EU Ġrej ects ĠGerman Ġcall [sep]
    [-100, 1, 0, -100, 2, 0, -100]
    >>> aligned.sentences[0].word_starts     # each word's first piece, in token_ids
    [1, 2, 4, 5]
    >>> word_predictions([0, 1, 0, 0, 2, 0, 0], [1, 2, 4, 5], ("O", "B-ORG", "B-MISC"))
    ['B-ORG', 'O', 'B-MISC', 'O']
"""

from __future__ import annotations

import dataclasses

import numpy as np

from common import tokenizer_files
from trainer.tasks.tagging import IGNORED, OUTSIDE

NO_TOKEN = -1  # a word's start when the window holds none of its pieces


@dataclasses.dataclass
class AlignedSentence:
    token_ids: list  # [cls] pieces [sep]
    labels: list  # per token: its word's label id on the word's first piece, else IGNORED
    word_starts: list  # per word: the position of its first piece in token_ids, or NO_TOKEN


@dataclasses.dataclass
class Alignment:
    """A split's aligned sentences and what did not fit."""

    sentences: list
    truncated: int = 0  # sentences cut at max_length
    words_cut: int = 0  # words whose first piece fell beyond max_length
    words_without_tokens: int = 0  # words the tokenizer gave no piece of their own

    def features(self, length: int, pad_id: int) -> dict:
        """token_ids, padding_mask and labels, right-padded to `length` (labels: IGNORED)."""
        count = len(self.sentences)
        token_ids = np.full((count, length), pad_id, np.int32)
        padding_mask = np.zeros((count, length), np.int32)
        labels = np.full((count, length), IGNORED, np.int32)
        for i, sentence in enumerate(self.sentences):
            size = len(sentence.token_ids)
            token_ids[i, :size] = sentence.token_ids
            padding_mask[i, :size] = 1
            labels[i, :size] = sentence.labels
        return {"token_ids": token_ids, "padding_mask": padding_mask, "labels": labels}

    def counts(self) -> dict:
        return {
            "sentences": len(self.sentences),
            "truncated": self.truncated,
            "words_cut": self.words_cut,
            "words_without_tokens": self.words_without_tokens,
        }


def token_words(words: list, offsets: list) -> list:
    """The word each token belongs to: the one owning its first character, a word owning
    the space before it (`" ".join(words)`'s offsets)."""
    owner = []
    for i, word in enumerate(words):
        owner.extend([i] * (len(word) + (1 if i else 0)))
    last = len(owner) - 1
    return [owner[min(start, last)] for start, _ in offsets]


class WordAligner:
    """Tokenizes sentences of words as running text and places their labels."""

    def __init__(self, tokenizer, info, max_length: int):
        self.tokenizer = tokenizer_files.text_only(tokenizer)  # a word '<s>' is characters
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.cls_id = info.special_token_ids["cls_token"]
        self.sep_id = info.special_token_ids["sep_token"]
        self.budget = max_length - 2  # the start and end tokens
        if self.budget < 1:
            raise ValueError(f"max_length {max_length} leaves no room for a word")

    def align(self, sentences: list, labels: list | None = None) -> Alignment:
        """`sentences`: lists of words; `labels`: a label id per word (IGNORED allowed), or
        None to predict only (every label IGNORED)."""
        texts = [" ".join(words) for words in sentences]
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        result = Alignment([])
        for i, (words, encoding) in enumerate(zip(sentences, encodings)):
            word_labels = labels[i] if labels is not None else [IGNORED] * len(words)
            result.sentences.append(self._one(words, word_labels, encoding, result))
        return result

    def _one(self, words: list, word_labels: list, encoding, result: Alignment):
        ids = encoding.ids[: self.budget]
        owners = token_words(words, encoding.offsets)
        starts = [NO_TOKEN] * len(words)
        for position, word in enumerate(owners):
            if starts[word] == NO_TOKEN:
                starts[word] = position
        token_labels = [IGNORED] * (len(ids) + 2)
        word_starts = []
        for word, start in enumerate(starts):
            if start == NO_TOKEN:
                result.words_without_tokens += 1
            elif start >= self.budget:
                result.words_cut += 1
                start = NO_TOKEN
            else:
                start += 1  # after [cls]
                token_labels[start] = word_labels[word]
            word_starts.append(start)
        result.truncated += len(encoding.ids) > self.budget
        return AlignedSentence([self.cls_id, *ids, self.sep_id], token_labels, word_starts)


def word_predictions(token_predictions, word_starts: list, labels: tuple) -> list:
    """Each word's predicted tag: the prediction (a label id) at its first piece; `O` for a
    word with none in the window (cut, or without a piece of its own)."""
    return [
        labels[int(token_predictions[start])] if start != NO_TOKEN else OUTSIDE
        for start in word_starts
    ]
