"""Prepared splits of random ids, written as the prepare pipeline writes them: a tokenizer,
shards of our records (common/schema.py) in TFRecord framing (common/tfrecord.py) committed
by a manifest.

Rows are either one full-length document ([CLS] ... [SEP], the RoBERTa benchmark's) or
packed documents as `prepare` makes them (docs/prepare.md, beam_pipelines/chunking.py):
whole documents `[CLS] text [SEP]` concatenated and cut into rows of `length`, so a row holds
several documents, each opened by the cls id (ModernBERT's document masks start there), and
may begin inside one cut off by the row before.

Example:
    >>> packed_rows(np.random.default_rng(0), 3, 16, 100, mean_document=6)[0]
    array([17, 3, 2, 55, 3, 2, 81, 40, 9, 3, 2, ...])
"""

from __future__ import annotations

import os

import numpy as np

CLS, SEP, FIRST_WORD = 2, 3, 5  # the WordPiece specials' ids: [PAD]=0 ... [MASK]=4


def packed_rows(rng, rows: int, length: int, vocab: int, mean_document: int) -> np.ndarray:
    """int64 [rows, length]: documents of 2 to 2 x mean_document - 2 tokens (uniform), each
    `[CLS] words [SEP]`, concatenated and cut into rows; the stream starts at a random
    offset into its first document, so row 0 need not start with [CLS] either."""
    needed, parts, total = rows * length + 2 * mean_document, [], 0
    while total < needed:
        words = rng.integers(FIRST_WORD, vocab, int(rng.integers(0, 2 * mean_document - 3)))
        parts.append(np.concatenate([[CLS], words, [SEP]]))
        total += len(parts[-1])
    stream = np.concatenate(parts)
    start = int(rng.integers(0, len(parts[0])))
    return stream[start : start + rows * length].reshape(rows, length).astype(np.int64)


def single_rows(rng, rows: int, length: int, vocab: int) -> np.ndarray:
    """int64 [rows, length]: one document per row, [CLS] words [SEP], no padding."""
    ids = rng.integers(FIRST_WORD, vocab, (rows, length), np.int64)
    ids[:, 0], ids[:, -1] = CLS, SEP
    return ids


def write_prepared(
    root: str, length: int, vocab: int, rows: int, eval_rows: int, packed: bool = False
) -> dict:
    """{"tokenizer", "train", "validation"}: folders under `root`. `packed`: rows of packed
    documents, length / 4 tokens on average (at least 8)."""
    import google_crc32c
    from tokenizers import Tokenizer, models

    from common import manifest, schema, shards, tfrecord, tokenizer_files

    specials = tokenizer_files.SPECIAL_TOKENS["wordpiece"]
    roles = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")
    words = {specials[r]: i for i, r in enumerate(roles)}
    words.update({f"w{i}": i for i in range(FIRST_WORD, vocab)})
    tokenizer_dir = os.path.join(root, "tokenizer")
    tokenizer_files.save(
        Tokenizer(models.WordLevel(words, unk_token="[UNK]")),
        tokenizer_dir,
        specials,
        model_max_length=length,
    )
    info = tokenizer_files.load(tokenizer_dir)[1]
    out = {"tokenizer": tokenizer_dir}
    for split, count, seed in (("train", rows, 0), ("validation", eval_rows, 1)):
        rng = np.random.default_rng(seed)
        ids = (
            packed_rows(rng, count, length, vocab, max(8, length // 4))
            if packed
            else single_rows(rng, count, length, vocab)
        )
        folder = out[split] = os.path.join(root, split)
        os.makedirs(folder)
        entries = []
        for index, part in enumerate(np.array_split(np.arange(count), 4)):
            data = tfrecord.frame(schema.encode_examples(ids[part], np.ones_like(ids[part])))
            name = shards.shard_name(split, index, len(part))
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
            entries.append(
                manifest.Shard(
                    name,
                    len(part),
                    len(part) * length,
                    len(data),
                    f"{google_crc32c.value(data):08x}",
                )
            )
        manifest.write_manifest(
            folder,
            manifest.Manifest(
                split=split,
                max_length=length,
                num_examples=count,
                num_tokens=count * length,
                shards=entries,
                tokenizer={**info.to_dict(), "path": tokenizer_dir},
                pipeline_args={},
                accounting={},
            ),
        )
    return out
