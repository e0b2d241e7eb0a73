"""Reading documents from .txt / .jsonl / .parquet files (optionally compressed) and
Hugging Face datasets, turning every bad record into a `DeadLetter` instead of an exception.

Both the tokenizer trainer (one machine) and the prepare pipeline (Beam workers, one
file or dataset shard per call) read through here, so they agree on what a document is:
- .txt: one document per line (`unit="line"`, as the seed), or per blank-line-separated
  paragraph (`unit="paragraph"`);
- .jsonl: one JSON object per line, text in `text_field`;
- .parquet: one row per document, text in the `text_field` column.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator, Union

from common import fs

DEFAULT_MAX_DOCUMENT_BYTES = 10_000_000  # larger documents are dead-lettered, not tokenized
_COMPRESSED = (".gz", ".bz2", ".zst", ".deflate")
_READ_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class Document:
    source: str  # file path or "hf:NAME/CONFIG/SPLIT"
    line: int  # 1-based line of a text/JSONL file, 0-based row of parquet / dataset
    text: str
    split: str | None = None  # set when the input names its split


@dataclasses.dataclass(frozen=True)
class DeadLetter:
    source: str
    line: int
    reason: str
    excerpt: str = ""
    documents: int = 1  # how many input documents this record stands for

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False)


Record = Union[Document, DeadLetter]


def file_format(path: str) -> str | None:
    name = path.lower()
    for ext in _COMPRESSED:
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    for fmt in ("txt", "jsonl", "parquet"):
        if name.endswith("." + fmt):
            return fmt
    if name.endswith(".json"):
        return "jsonl"
    return None


def _excerpt(raw: bytes | str, size: int = 120) -> str:
    if isinstance(raw, bytes):
        raw = raw[: size * 4].decode("utf-8", errors="replace")
    return raw[:size]


def _lines(f, limit: int) -> Iterator[tuple[int, bytes | None, int]]:
    """Yields `(line_no, line, nbytes)`; `line` is None for a line over `limit` bytes,
    which is skipped through without being held in memory (a 50 MB "document")."""
    buf, nbytes, too_long, line_no = bytearray(), 0, False, 1

    def add(piece):
        nonlocal nbytes, too_long
        nbytes += len(piece)
        if too_long or len(buf) + len(piece) > limit:
            too_long = True
            buf.clear()
        else:
            buf.extend(piece)

    while chunk := f.read(_READ_CHUNK):
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            add(chunk[start:newline])
            yield line_no, None if too_long else bytes(buf).rstrip(b"\r"), nbytes
            buf, nbytes, too_long, line_no = bytearray(), 0, False, line_no + 1
            start = newline + 1
        add(chunk[start:])
    if nbytes or too_long:
        yield line_no, None if too_long else bytes(buf).rstrip(b"\r"), nbytes


def _decoded_lines(path: str, f, limit: int) -> Iterator[Record | tuple[int, str]]:
    """`(line_no, text)` for good lines, DeadLetter for too long / invalid UTF-8 ones."""
    for line_no, raw, nbytes in _lines(f, limit):
        if raw is None:
            yield DeadLetter(path, line_no, f"document of {nbytes} bytes is over the "
                             f"limit of {limit} bytes (--max_document_bytes)")
            continue
        try:
            yield line_no, raw.decode("utf-8")
        except UnicodeDecodeError as err:
            yield DeadLetter(path, line_no, f"invalid UTF-8 at byte {err.start}",
                             _excerpt(raw))


def _read_txt(path, f, limit, unit) -> Iterator[Record]:
    paragraph, first_line = [], 0
    for item in _decoded_lines(path, f, limit):
        if isinstance(item, DeadLetter):
            yield item
            continue
        line_no, text = item
        if unit == "line":
            yield Document(path, line_no, text)
        elif text.strip():
            first_line = first_line or line_no
            paragraph.append(text)
        elif paragraph:
            yield Document(path, first_line, "\n".join(paragraph))
            paragraph, first_line = [], 0
    if paragraph:
        yield Document(path, first_line, "\n".join(paragraph))


def _text_of(obj, text_field: str) -> tuple[str | None, str]:
    """`(text, "")` or `(None, reason)` for one JSON object / row."""
    if not isinstance(obj, dict):
        return None, f"JSON line is a {type(obj).__name__}, not an object"
    if text_field not in obj:
        return None, f"missing field {text_field!r}"
    value = obj[text_field]
    if not isinstance(value, str):
        return None, f"field {text_field!r} is {type(value).__name__}, not a string"
    return value, ""


def _read_jsonl(path, f, limit, text_field) -> Iterator[Record]:
    for item in _decoded_lines(path, f, limit):
        if isinstance(item, DeadLetter):
            yield item
            continue
        line_no, line = item
        if not line.strip():
            continue  # blank lines between JSON objects are not documents
        try:
            obj = json.loads(line)
        except ValueError as err:
            yield DeadLetter(path, line_no, f"malformed JSON: {err}", _excerpt(line))
            continue
        text, reason = _text_of(obj, text_field)
        yield Document(path, line_no, text) if reason == "" else DeadLetter(
            path, line_no, reason, _excerpt(line))


def _read_parquet(path, f, limit, text_field) -> Iterator[Record]:
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(f)
    rows = parquet.metadata.num_rows
    if text_field not in parquet.schema_arrow.names:
        yield DeadLetter(path, 0, f"no column {text_field!r} (columns: "
                         f"{parquet.schema_arrow.names}); all {rows} rows rejected",
                         documents=rows)
        return
    row = 0
    for batch in parquet.iter_batches(columns=[text_field], batch_size=1024):
        for value in batch.column(0).to_pylist():
            if not isinstance(value, str):
                yield DeadLetter(path, row, f"column {text_field!r} holds "
                                 f"{type(value).__name__}, not a string")
            elif len(value) > limit and len(value.encode("utf-8")) > limit:
                yield DeadLetter(path, row, f"document of {len(value.encode())} bytes is "
                                 f"over the limit of {limit} bytes (--max_document_bytes)")
            else:
                yield Document(path, row, value)
            row += 1


def read_file(
    path: str,
    text_field: str = "text",
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
    txt_unit: str = "line",
) -> Iterator[Record]:
    """Every document of one file, or a DeadLetter saying why it could not be read."""
    fmt = file_format(path)
    if fmt is None:
        yield DeadLetter(path, 0, "unsupported file type (expected .txt, .jsonl or .parquet, "
                         "optionally compressed)")
        return
    produced = 0
    try:
        with fs.open_read(path, compressed=fmt != "parquet") as f:
            if fmt == "txt":
                records = _read_txt(path, f, max_document_bytes, txt_unit)
            elif fmt == "jsonl":
                records = _read_jsonl(path, f, max_document_bytes, text_field)
            else:
                records = _read_parquet(path, f, max_document_bytes, text_field)
            for record in records:
                produced += 1
                yield record
    except Exception as err:  # a corrupt gzip / parquet, a vanished file: say which
        yield DeadLetter(path, produced, f"unreadable after {produced} records: "
                         f"{type(err).__name__}: {err}")


def expand_inputs(patterns: str | list[str]) -> list[str]:
    """Paths matching comma-separated globs; a clear error when one matches nothing."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p]
    paths = []
    for pattern in patterns:
        matched = fs.glob(pattern)
        if not matched:
            raise FileNotFoundError(f"--input {pattern!r} matches no file")
        paths.extend(matched)
    return sorted(set(paths))


# --- Hugging Face datasets --------------------------------------------------------------


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


def read_hf_shard(name, config, split, text_field, index, num_shards,
                  max_document_bytes=DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[Record]:
    """Documents of one shard of a dataset split; rows keep their index within the shard."""
    source = f"hf:{name}/{config or ''}/{split}#{index}"
    ds = _load_hf(name, config, split, streaming=True).shard(num_shards, index)
    for row, obj in enumerate(ds):
        text, reason = _text_of(obj, text_field)
        if reason:
            yield DeadLetter(source, row, reason, _excerpt(str(obj)))
        elif len(text) > max_document_bytes and len(text.encode()) > max_document_bytes:
            yield DeadLetter(source, row, f"document of {len(text.encode())} bytes is over "
                             f"the limit of {max_document_bytes} bytes (--max_document_bytes)")
        else:
            yield Document(source, row, text, split)
