"""Sentence embeddings from a model the product loads: a run folder, a checkpoint or a
keras-hub export (anything `trainer.models.model_source.resolve` accepts).

A text is tokenized with the run's own tokenizer files as fine-tuning reads one text
(trainer/finetuning/packing.py): the control tokens' strings in it read as characters
(`tokenizer_files.text_only`), cut to the model's length, then framed by the tokenizer's
`cls_token` and `sep_token` (`[CLS] text [SEP]`, `<s> text </s>`). The final hidden states are
pooled (`mean` over the tokens `padding_mask` keeps, or `cls`, the first token:
trainer/models/pooling.py, fine-tuning's implementation) and L2-normalised, so a dot product
is the cosine. The sentence-transformers export (`sentence_transformers_export.py`) describes
this same computation to `SentenceTransformer(path)`; its tests hold the two within 1e-5.

Example:
    >>> embedder = Embedder(model_source.resolve("runs/tiny"), pooling="mean")
    >>> vectors = embedder.embed(["a text", "another, longer text"])
    >>> vectors.shape, round(float((vectors[0] ** 2).sum()), 4)
    ((2, 128), 1.0)
"""

from __future__ import annotations

import keras
import numpy as np

from common import tokenizer_files
from common.errors import UserError
from trainer.models import model_source, pooling
from trainer.run_folder import run_dir

BATCH_SIZE = 32


class EmbeddingError(UserError):
    """The model cannot embed texts as asked; one line for the user."""


def text_rows(tokenizer, info, texts, max_length: int) -> list[list[int]]:
    """Each text's ids as the model reads one text: cut to `max_length` with its start and end
    tokens, which frame it. `tokenizer` (a `tokenizers.Tokenizer`) is set to read control
    tokens' strings as text and to neither cut nor pad on its own."""
    tokenizer = tokenizer_files.text_only(tokenizer)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    cls_id = info.special_token_ids["cls_token"]
    sep_id = info.special_token_ids["sep_token"]
    encoded = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    budget = max_length - 2  # the start and end tokens
    return [[cls_id, *e.ids[:budget], sep_id] for e in encoded]


def features(rows: list, pad_id: int, with_segments: bool, length: int | None = None) -> dict:
    """The backbone's input dict for `rows`, right-padded to `length` (default: the longest;
    the position ids pretraining used); one segment."""
    length = length or max(len(row) for row in rows)
    token_ids = np.full((len(rows), length), pad_id, np.int32)
    padding_mask = np.zeros((len(rows), length), np.int32)
    for i, row in enumerate(rows):
        token_ids[i, : len(row)] = row
        padding_mask[i, : len(row)] = 1
    inputs = {"token_ids": token_ids, "padding_mask": padding_mask}
    if with_segments:
        inputs["segment_ids"] = np.zeros_like(token_ids)
    return inputs


def embedding_model(backbone, how: str) -> keras.Model:
    """The backbone, its final hidden states pooled (`how`: pooling.CHOICES) and L2-normalised."""
    inputs = backbone.input
    states = pooling.token_states(backbone(inputs))
    pooled = pooling.pool(states, inputs["padding_mask"], how, dtype=backbone.dtype_policy)
    return keras.Model(inputs, pooling.l2_normalised(pooled), name=f"{how}_embedding")


class Embedder:
    """One model's sentence embeddings: `embed(texts)` -> (n, hidden) float32, unit rows."""

    def __init__(self, source: model_source.ModelSource, pooling: str = "mean", masked_lm=None):
        if source.tokenizer_dir is None:
            raise EmbeddingError(
                f"{source.path} has no {run_dir.TOKENIZER_DIR}/ folder to tokenize texts with."
            )
        self.tokenizer, self.info = tokenizer_files.load(source.tokenizer_dir)
        self.max_length = source.max_sequence_length
        self.with_segments = source.family.takes_segment_ids
        masked_lm = masked_lm or model_source.load_source(source)
        self.model = embedding_model(masked_lm.backbone, pooling)

    def rows(self, texts) -> list[list[int]]:
        return text_rows(self.tokenizer, self.info, texts, self.max_length)

    def embed(self, texts, batch_size: int = BATCH_SIZE) -> np.ndarray:
        """Unit vectors of `texts`, in order; each batch padded to its longest text."""
        rows = self.rows(texts)
        out = []
        for start in range(0, len(rows), batch_size):
            batch = features(rows[start : start + batch_size], self.info.pad_id, self.with_segments)
            out.append(keras.ops.convert_to_numpy(self.model(batch, training=False)))
        hidden = self.model.output.shape[-1]
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, hidden), np.float32)
