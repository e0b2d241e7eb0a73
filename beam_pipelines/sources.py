"""Reading documents from .txt / .jsonl / .parquet files (optionally compressed) and
Hugging Face datasets, turning every bad record into a `DeadLetter` instead of an exception.

Both the tokenizer trainer (one machine) and the prepare pipeline (Beam workers, one
file or dataset shard per call) read through here, so they agree on what a document is:
- .txt: one document per line (`unit="line"`, as the HF example), or per blank-line-separated
  paragraph (`unit="paragraph"`);
- .jsonl: one JSON object per line, text in `text_field`;
- .parquet: one row per document, text in the `text_field` column.
"""

from __future__ import annotations

import dataclasses
import datetime
import gzip
import lzma
import zlib
from collections import Counter
from collections.abc import Iterator

import apache_beam as beam
import orjson

from beam_pipelines import hf_datasets
from beam_pipelines.accounting import emit_stats
from beam_pipelines.documents import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DeadLetter,
    Document,
    Record,
    excerpt,
    text_of,
)
from common import fs

DEFAULT_RANGE_BYTES = 64 << 20  # larger uncompressed text/JSONL files are read in ranges
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".zst", ".deflate")
BOM = "\ufeff"
_READ_CHUNK = 1 << 20
# JSON's whitespace (RFC 8259): a JSONL line of these alone is a blank between objects. Any
# other whitespace or separator (U+3000, U+0085, U+001C...) is not JSON: such a line is a
# dead letter, so that every line is a document, a dead letter or a blank.
JSON_WHITESPACE = " \t\r\n"


def file_format(path: str) -> str | None:
    name = path.lower()
    for ext in COMPRESSED_SUFFIXES:
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    for fmt in ("txt", "jsonl", "parquet"):
        if name.endswith("." + fmt):
            return fmt
    if name.endswith(".json"):
        return "jsonl"
    return None


def _skip_partial_line(f, start: int) -> int:
    """Positions `f` at the first line that starts at or after `start`; returns that offset.
    The line running through `start` belongs to the range before it."""
    f.seek(start - 1)
    pos = start - 1
    while chunk := f.read(_READ_CHUNK):
        newline = chunk.find(b"\n")
        if newline >= 0:
            f.seek(pos + newline + 1)
            return pos + newline + 1
        pos += len(chunk)
    return pos


def _lines(f, limit: int, start: int = 0, end: int | None = None):
    """Yields `(line_no, offset, line, nbytes)` for the lines that start in [start, end);
    `line_no` is 0 when reading a range that does not begin the file (unknown there).
    `line` is None for a line over `limit` bytes, which is skipped through without being
    held in memory (a 50 MB "document")."""
    offset = _skip_partial_line(f, start) if start else 0
    line_no = 0 if start else 1
    buf, nbytes, too_long = bytearray(), 0, False

    def add(piece):
        nonlocal nbytes, too_long
        nbytes += len(piece)
        if too_long or len(buf) + len(piece) > limit:
            too_long = True
            buf.clear()
        else:
            buf.extend(piece)

    while (end is None or offset < end) and (chunk := f.read(_READ_CHUNK)):
        begin = 0
        while (newline := chunk.find(b"\n", begin)) >= 0:
            add(chunk[begin:newline])
            yield line_no, offset, None if too_long else bytes(buf).rstrip(b"\r"), nbytes
            offset += nbytes + 1
            buf, nbytes, too_long = bytearray(), 0, False
            line_no, begin = line_no + 1 if line_no else 0, newline + 1
            if end is not None and offset >= end:
                return
        add(chunk[begin:])
    if nbytes or too_long:
        yield line_no, offset, None if too_long else bytes(buf).rstrip(b"\r"), nbytes


def _decoded_lines(path, f, limit, start=0, end=None):
    """`(line_no, offset, text)` for good lines, DeadLetter for too long / bad UTF-8 ones."""
    ranged = bool(start or end)
    for line_no, offset, raw, nbytes in _lines(f, limit, start, end):
        where = dict(offset=offset if ranged else None)
        if raw is None:
            yield DeadLetter(
                path,
                line_no,
                f"document of {nbytes} bytes is over the "
                f"limit of {limit} bytes (--max_document_bytes)",
                **where,
            )
            continue
        try:
            text = raw.decode("utf-8")
            # A byte-order mark opens some files: part of no document.
            yield line_no, where["offset"], text[1:] if offset == 0 and text[:1] == BOM else text
        except UnicodeDecodeError as err:
            yield DeadLetter(
                path, line_no, f"invalid UTF-8 at byte {err.start}", excerpt(raw), **where
            )


def _read_txt(path, f, limit, unit, start=0, end=None) -> Iterator[Record]:
    paragraph, first_line = [], 0
    for item in _decoded_lines(path, f, limit, start, end):
        if isinstance(item, DeadLetter):
            yield item
            continue
        line_no, offset, text = item
        if unit == "line":
            yield Document(path, line_no, text, offset=offset)
        elif text.strip():
            first_line = first_line or line_no
            paragraph.append(text)
        elif paragraph:
            yield Document(path, first_line, "\n".join(paragraph))
            paragraph, first_line = [], 0
    if paragraph:
        yield Document(path, first_line, "\n".join(paragraph))


def _read_jsonl(path, f, limit, text_field, start=0, end=None) -> Iterator[Record]:
    for item in _decoded_lines(path, f, limit, start, end):
        if isinstance(item, DeadLetter):
            yield item
            continue
        line_no, offset, line = item
        if not line.strip(JSON_WHITESPACE):
            continue  # blank lines between JSON objects are not documents
        try:
            obj = orjson.loads(line)  # ~4x json.loads; JSONL parsing is on the hot path
        except orjson.JSONDecodeError as err:
            yield DeadLetter(path, line_no, f"malformed JSON: {err}", excerpt(line), offset=offset)
            continue
        text, reason = text_of(obj, text_field)
        yield (
            Document(path, line_no, text, offset=offset)
            if reason == ""
            else DeadLetter(path, line_no, reason, excerpt(line), offset=offset)
        )


def _read_parquet(path, f, limit, text_field) -> Iterator[Record]:
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(f)
    rows = parquet.metadata.num_rows
    if text_field not in parquet.schema_arrow.names:
        yield DeadLetter(
            path,
            0,
            f"no column {text_field!r} (columns: "
            f"{parquet.schema_arrow.names}); all {rows} rows rejected",
            documents=rows,
        )
        return
    row = 0
    for batch in parquet.iter_batches(columns=[text_field], batch_size=1024):
        for value in batch.column(0).to_pylist():
            if not isinstance(value, str):
                yield DeadLetter(
                    path, row, f"column {text_field!r} holds {type(value).__name__}, not a string"
                )
            elif len(value) > limit and len(value.encode("utf-8")) > limit:
                yield DeadLetter(
                    path,
                    row,
                    f"document of {len(value.encode())} bytes is "
                    f"over the limit of {limit} bytes (--max_document_bytes)",
                )
            else:
                yield Document(path, row, value)
            row += 1


def read_file(
    path: str,
    text_field: str = "text",
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
    txt_unit: str = "line",
    start: int = 0,
    end: int | None = None,
) -> Iterator[Record]:
    """Every document of one file (or of the lines starting in the byte range
    [start, end), see `byte_ranges`), or a DeadLetter saying why it could not be read."""
    fmt = file_format(path)
    if fmt is None:
        yield DeadLetter(
            path,
            0,
            "unsupported file type (expected .txt, .jsonl or .parquet, optionally compressed)",
        )
        return
    produced = 0
    try:
        with fs.open_read(path, compressed=fmt != "parquet") as f:
            if fmt == "txt":
                records = _read_txt(path, f, max_document_bytes, txt_unit, start, end)
            elif fmt == "jsonl":
                records = _read_jsonl(path, f, max_document_bytes, text_field, start, end)
            else:
                records = _read_parquet(path, f, max_document_bytes, text_field)
            for record in records:
                produced += 1
                yield record
    except Exception as err:
        if not is_format_error(err):
            raise  # a failed read (reset, timeout, 5xx, permission): the runner retries
        yield DeadLetter(
            path,
            produced,
            f"unreadable after {produced} records: {type(err).__name__}: {err}",
            offset=start or None,
        )


def is_format_error(err: BaseException) -> bool:
    """Bad bytes in the file (dead-lettered: a retry would read the same bytes) as opposed
    to a failed read (re-raised, so that the runner retries the bundle and no document is
    silently dropped)."""
    if isinstance(err, (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile, UnicodeError)):
        return True  # truncated or corrupt compressed streams
    if isinstance(err, OSError):  # bz2 reports corrupt data as a plain OSError
        return "Invalid data stream" in str(err)
    return isinstance(err, ValueError)  # e.g. pyarrow.ArrowInvalid: not a parquet file


# ReadDocuments' output of (path, what changed) for the inputs that changed since listed.
CHANGED = "changed"


def changed_input(path: str, listed, now) -> str | None:
    """How the file read differs from the one listed (a `fs.Stamp` each; None: gone), or
    None when it is the same: same size and same last write."""
    listed = fs.Stamp(*listed)
    if now == listed:
        return None
    what = "is gone" if now is None else f"is now {now.size:,} bytes, {_when(now.updated)}"
    return (
        f"{path} changed while the run read it (listed: {listed.size:,} bytes, "
        f"{_when(listed.updated)}; {what})"
    )


def _when(seconds: float) -> str:
    return "written " + datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(
        timespec="microseconds"
    )


class ReadDocuments(beam.DoFn):
    """A read task -> Documents (main), DeadLetters ('dead') and, for a file that is no
    longer the one listed, (path, one line saying so) (CHANGED); counts what it read.

    A task is `("file", path, split, start, end, listed)` (a byte range, see
    `input_spec.byte_ranges`; `listed`: the file's `fs.Stamp` at listing, or None to check
    nothing) or `("hf", split, index, num_shards)`. The stamp is compared after the read,
    so that a rewrite at any time before its end is seen: a local exact dedup reads the
    input twice and keeps documents by their place in it (`local/exact_dedup.py`), and a
    file grown or shrunk since its byte ranges were cut would lose or repeat lines.

    Args:
        text_field: the JSONL field or parquet column holding the text.
        max_document_bytes: longer documents are dead-lettered.
        txt_unit: a .txt document is a "line" or a blank-line separated "paragraph".
        hf_name: the Hugging Face dataset of "hf" tasks, or None.
        hf_config: that dataset's configuration, or None.
    """

    def __init__(
        self, text_field, max_document_bytes, txt_unit="line", hf_name=None, hf_config=None
    ):
        self.text_field, self.max_document_bytes = text_field, max_document_bytes
        self.txt_unit, self.hf_name, self.hf_config = txt_unit, hf_name, hf_config

    def start_bundle(self):
        self.stats = Counter()

    def _records(self, task):
        if task[0] == "file":
            _, path, split, start, end, listed = task
            try:
                for record in read_file(
                    path, self.text_field, self.max_document_bytes, self.txt_unit, start, end
                ):
                    if isinstance(record, Document) and split:
                        record = dataclasses.replace(record, split=split)
                    yield record
            except Exception:
                # A read that failed because the file went away or was replaced under the
                # run (deletion is a change) is the refusal, not a retry: the retry would
                # fail the same way and end in a traceback.
                change = listed is not None and changed_input(path, listed, fs.stamp(path))
                if not change:
                    raise
                yield beam.pvalue.TaggedOutput(CHANGED, (path, change))
                return
            if listed is not None and (change := changed_input(path, listed, fs.stamp(path))):
                yield beam.pvalue.TaggedOutput(CHANGED, (path, change))
        else:
            _, split, index, num_shards = task
            yield from hf_datasets.read_hf_shard(
                self.hf_name,
                self.hf_config,
                split,
                self.text_field,
                index,
                num_shards,
                self.max_document_bytes,
            )

    def process(self, task):
        for record in self._records(task):
            if isinstance(record, beam.pvalue.TaggedOutput):
                yield record
            elif isinstance(record, DeadLetter):
                self.stats["documents_read"] += record.documents
                self.stats["documents_rejected"] += record.documents
                yield beam.pvalue.TaggedOutput("dead", record)
            else:
                self.stats["documents_read"] += 1
                yield record

    def finish_bundle(self):
        yield from emit_stats(self.stats)
