"""What contrastive fine-tuning reads, in fixed shapes: texts tokenized once as the model reads
one text (`release/embeddings.text_rows`: `[cls] text [sep]`, cut to the length and counted),
each batch right-padded to a length bucket instead of its own longest row.

Why buckets: XLA compiles one program per input shape, so padding each batch to its longest
text (what sentence-transformers does in PyTorch) would compile again at almost every step;
padding everything to `max_length` wastes most of the compute on short texts. Buckets (16, 32,
64, ..., `max_length`) bound the programs to a handful and the padding to under half a row.
A batch's queries and documents are bucketed apart (queries are usually much shorter).

The training pairs come from a pair file (`tasks/pairs.py`) or a BEIR folder's training
judgements (one pair per query and relevant document, `train_pairs`); the evaluation texts are
encoded longest first in fixed batches (`Encoder`), the last batch filled with empty rows.

Example:
    >>> sizes = buckets(128)                       # (16, 32, 64, 128)
    >>> texts = TextRows.of(tokenizer, info, ["a query", "a document"], 128)
    >>> batch = layout(info, 128, family, packed=False).features([texts.rows[0]])
    >>> batch["token_ids"].shape
    (1, 16)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from common import fs
from common.errors import UserError
from trainer.finetuning import packed_rows
from trainer.release import embeddings
from trainer.tasks import pairs as pair_files
from trainer.tasks.retrieval import beir

SMALLEST_BUCKET = 16
TRAIN_SPLIT = "train"  # the judgements a BEIR folder trains on


def buckets(max_length: int) -> tuple[int, ...]:
    """The padded lengths a batch may take: powers of two from 16, then `max_length`."""
    sizes, size = [], SMALLEST_BUCKET
    while size < max_length:
        sizes.append(size)
        size *= 2
    return (*sizes, max_length)


def model(backbone, family, how: str, packed: bool):
    """The embedding model of `backbone` for a layout: pooled (`how`) and normalised from
    padded rows, or from packed ones (`packed_models.PackedEmbedding`)."""
    from trainer.models import packed_models

    if packed:
        return packed_models.PackedEmbedding(backbone, family.packed_states, how)
    return embeddings.embedding_model(backbone, how)


def layout(info, max_length: int, family, packed: bool, multiple: int = 1):
    """How a batch's rows become the model's inputs: padded to the bucket of the longest
    (`packed_rows.Padded`), or several to a row (`packed_rows.Packed`: families with
    `packed_states`), each device getting whole rows."""
    sizes = buckets(max_length)
    if packed:
        return packed_rows.Packed(info.pad_id, max_length, multiple)
    return packed_rows.Padded(info.pad_id, sizes, family.takes_segment_ids)


@dataclasses.dataclass(frozen=True)
class TextRows:
    """Texts as the model reads them, and how many were cut to fit."""

    rows: tuple
    truncated: int

    @classmethod
    def of(cls, tokenizer, info, texts, max_length: int) -> TextRows:
        rows = embeddings.text_rows(tokenizer, info, texts, max_length + 1)
        cut = sum(len(row) > max_length for row in rows)  # one token over: it was cut
        sep = info.special_token_ids["sep_token"]
        kept = tuple(
            row if len(row) <= max_length else [*row[: max_length - 1], sep] for row in rows
        )
        return cls(kept, cut)


def is_beir_folder(path: str) -> bool:
    return fs.exists(fs.join(path, beir.CORPUS))


def train_pairs(path: str) -> pair_files.Pairs:
    """The training pairs of `path`: a pair file, or a BEIR folder's `qrels/train.tsv` (a pair
    per judged query and document of grade above 0, no hard negatives)."""
    if not is_beir_folder(path):
        return pair_files.read(path)
    data = beir.read(path, TRAIN_SPLIT)
    found = [
        (data.queries[query_id], data.corpus[doc_id])
        for query_id, judged in data.qrels.items()
        for doc_id, grade in judged.items()
        if grade > 0
    ]
    if not found:
        raise UserError(f"{path}: its {TRAIN_SPLIT} judgements hold no relevant document")
    queries, positives = zip(*found)
    return pair_files.Pairs(
        path, queries, positives, ((),) * len(found), tuple(range(1, len(found) + 1))
    )


@dataclasses.dataclass(frozen=True)
class TrainRows:
    """Every pair's query, positive and hard negatives as rows (`TextRows`)."""

    queries: TextRows
    positives: TextRows
    negatives: TextRows  # pair i's j-th negative at i * hard_negatives + j
    hard_negatives: int

    @classmethod
    def of(cls, tokenizer, info, pairs: pair_files.Pairs, max_length: int) -> TrainRows:
        flat = [text for negatives in pairs.negatives for text in negatives]
        return cls(
            TextRows.of(tokenizer, info, pairs.queries, max_length),
            TextRows.of(tokenizer, info, pairs.positives, max_length),
            TextRows.of(tokenizer, info, flat, max_length),
            len(pairs.negatives[0]),
        )

    def batch(self, indices, layout, chunk: int | None = None) -> tuple[dict, dict]:
        """(queries, documents) of the pairs `indices` as `layout` lays them out: the
        positives in order, then every pair's hard negatives (`contrastive.info_nce`'s
        layout); with `chunk` (gradient caching), packed a chunk of pairs at a time."""
        queries = [self.queries.rows[i] for i in indices]
        documents = [self.positives.rows[i] for i in indices]
        width = self.hard_negatives
        negatives = [self.negatives.rows[i * width + j] for i in indices for j in range(width)]
        return layout.features(queries, chunk), layout.features(documents + negatives, chunk)


class Encoder:
    """Texts -> unit vectors by `embed(features) -> array`, in batches of `batch_size` rows
    (the last filled with a bare `[cls] [sep]` row: one shape per bucket), longest texts
    first."""

    def __init__(self, embed, tokenizer, info, max_length: int, layout, batch_size):
        self.embed, self.tokenizer, self.info = embed, tokenizer, info
        self.max_length, self.layout, self.batch_size = max_length, layout, batch_size

    def __call__(self, texts) -> np.ndarray:
        rows = TextRows.of(self.tokenizer, self.info, texts, self.max_length).rows
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
        out = [None] * len(rows)
        for start in range(0, len(order), self.batch_size):
            taken = order[start : start + self.batch_size]
            batch = [rows[i] for i in taken]
            filler = [self.info.special_token_ids[name] for name in ("cls_token", "sep_token")]
            batch += [filler] * (self.batch_size - len(batch))  # outputs dropped
            vectors = np.asarray(self.embed(self.layout.features(batch)))
            for i, vector in zip(taken, vectors):
                out[i] = vector
        return np.stack(out).astype(np.float32) if out else np.zeros((0, 0), np.float32)
