"""Documents packed in one row: which document each token belongs to, and its position in it.

`prepare` concatenates whole tokenized documents, each with the tokenizer's own special tokens
(`[CLS] text [SEP]` for unigram and WordPiece, `<s> text </s>` for byte-level BPE:
docs/prepare.md), then cuts the stream into rows of `max_length` (beam_pipelines/chunking.py).
So inside a row a new document starts at every cls/bos token (`separator_id`), and a row may
begin with the end of a document cut off by the previous row (no cls there: it is the row's
first document, positions from 0, its true offset lost). Masking never selects a special token
nor draws one as a random replacement (trainer/data/masking.py), so the cls tokens are still in
the masked ids the model sees.

Everything here is a dense op on fixed shapes (a cumulative sum and a sorted search), so it
runs inside the compiled train step on TensorFlow (XLA) and JAX alike.

Example:
    >>> token_ids = np.array([[2, 7, 8, 3, 2, 9, 3, 0]])   # cls=2, sep=3, pad=0
    >>> padding_mask = token_ids != 0
    >>> segments, positions = document_ids(token_ids, padding_mask, separator_id=2)
    >>> segments   # [[1, 1, 1, 1, 2, 2, 2, -1]]: padding is a segment of its own
    >>> positions  # [[0, 1, 2, 3, 0, 1, 2, 0]]
"""

from __future__ import annotations

from keras import ops

PADDING_SEGMENT = -1  # the segment id of every padding token


def document_ids(token_ids, padding_mask, separator_id: int | None):
    """(segment_ids, positions), both int32 [batch, length].

    `separator_id` is the token that opens each document (the tokenizer's cls/bos); None
    means one document per row (a fine-tuning example), positions 0..length-1 as
    transformers numbers them. Padding tokens get `PADDING_SEGMENT`: they attend only to
    each other, so no attention row is empty (Splash attention requires that) and no real
    token sees them. Their positions are those of the last document's continuation (any
    value would do: nothing reads them).
    """
    padding_mask = ops.cast(padding_mask, "bool")
    batch, length = ops.shape(token_ids)[0], ops.shape(token_ids)[1]
    index = ops.broadcast_to(ops.arange(length, dtype="int32")[None, :], (batch, length))
    if separator_id is None:
        segments = ops.zeros((batch, length), "int32")
        return ops.where(padding_mask, segments, PADDING_SEGMENT), index
    starts = ops.cast(ops.equal(token_ids, separator_id), "int32")
    segments = ops.cumsum(starts, axis=1)  # non-decreasing along each row
    # A document starts at the first token of its segment. Offsetting each row by more
    # than any segment count makes the flattened ids sorted across rows too, so one
    # left-sided search finds, for every token, the flat index where its segment begins.
    offsets = ops.arange(batch, dtype="int32")[:, None] * (length + 1)
    flat = ops.reshape(segments + offsets, (-1,))
    first = ops.cast(ops.searchsorted(flat, flat, side="left"), "int32")
    positions = ops.reshape(ops.arange(batch * length, dtype="int32") - first, (batch, length))
    return ops.where(padding_mask, segments, PADDING_SEGMENT), positions
