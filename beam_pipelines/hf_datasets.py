"""Documents from Hugging Face datasets (a hub name, or a folder written by save_to_disk),
read as independent shards so that workers read in parallel; bad rows become DeadLetters.
"""

from __future__ import annotations

from collections.abc import Iterator

from beam_pipelines.documents import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DeadLetter,
    Document,
    Record,
    excerpt,
    text_of,
)
from common import fs


def _load_hf(name: str, config: str | None, split: str, streaming: bool):
    import datasets

    if fs.exists(fs.join(name, "dataset_dict.json")) or fs.exists(
        fs.join(name, "dataset_info.json")
    ):  # a dataset saved with save_to_disk
        loaded = datasets.load_from_disk(name)
        return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
    return datasets.load_dataset(name, config, split=split, streaming=streaming)


def hf_num_shards(name: str, config: str | None, split: str) -> int:
    """How many pieces workers can read in parallel (files for a hub dataset)."""
    ds = _load_hf(name, config, split, streaming=True)
    return getattr(ds, "n_shards", None) or max(1, min(64, len(ds) // 10_000))


def read_hf_shard(
    name,
    config,
    split,
    text_field,
    index,
    num_shards,
    max_document_bytes=DEFAULT_MAX_DOCUMENT_BYTES,
) -> Iterator[Record]:
    """Documents of one shard of a dataset split; rows keep their index within the shard."""
    source = f"hf:{name}/{config or ''}/{split}#{index}"
    ds = _load_hf(name, config, split, streaming=True).shard(num_shards, index)
    for row, obj in enumerate(ds):
        text, reason = text_of(obj, text_field)
        if reason:
            yield DeadLetter(source, row, reason, excerpt(str(obj)))
        elif len(text) > max_document_bytes and len(text.encode()) > max_document_bytes:
            yield DeadLetter(
                source,
                row,
                f"document of {len(text.encode())} bytes is over "
                f"the limit of {max_document_bytes} bytes (--max_document_bytes)",
            )
        else:
            yield Document(source, row, text, split)
