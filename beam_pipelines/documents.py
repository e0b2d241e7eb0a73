"""What the pipeline passes around: a document read from the input, a dead letter for a record
that could not be one, and a removed document (with its place in the input, for the sample).
Every stage (sources, cleaning, dedup, near dedup, the local twins) speaks these types."""

from __future__ import annotations

import dataclasses
import json

DEFAULT_MAX_DOCUMENT_BYTES = 10_000_000  # larger documents are dead-lettered, not tokenized
REMOVED = "removed"  # the tagged output of `Removed` records
EXCERPT_CHARS = 200


@dataclasses.dataclass(frozen=True)
class Document:
    source: str  # file path or "hf:NAME/CONFIG/SPLIT"
    line: int  # 1-based line of a text/JSONL file, 0-based row of parquet / dataset
    text: str
    split: str | None = None  # set when the input names its split, or once prepare chose it
    offset: int | None = None  # byte offset of the line, for reads of a byte range
    origin: str | None = None  # the named source (--sources) it came from, set by the mixture


@dataclasses.dataclass(frozen=True)
class DeadLetter:
    source: str
    line: int
    reason: str
    excerpt: str = ""
    documents: int = 1  # how many input documents this record stands for
    offset: int | None = None  # byte offset of the line, for reads of a byte range

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False)


Record = Document | DeadLetter


def excerpt(raw: bytes | str, size: int = 120) -> str:
    if isinstance(raw, bytes):
        raw = raw[: size * 4].decode("utf-8", errors="replace")
    return raw[:size]


def text_of(obj, text_field: str) -> tuple[str | None, str]:
    """`(text, "")` or `(None, reason)` for one JSON object / row."""
    if not isinstance(obj, dict):
        return None, f"JSON line is a {type(obj).__name__}, not an object"
    if text_field not in obj:
        return None, f"missing field {text_field!r}"
    value = obj[text_field]
    if not isinstance(value, str):
        return None, f"field {text_field!r} is {type(value).__name__}, not a string"
    return value, ""


def position(source: str, line: int, offset: int | None) -> tuple:
    """Where a document lies in the input, as a sortable key: files by path, then by byte
    offset (reads of byte ranges know no line number) or line. The smallest copy wins."""
    return (source, -1 if offset is None else offset, line)


def doc_position(doc: Document) -> tuple:
    return position(doc.source, doc.line, doc.offset)


def split_of(doc: Document) -> str:
    """The split a document goes to (also where a removed one is counted): the one set when
    it entered the removal steps (`cleaning.CountBySplit`, or from the first read's record on
    a local reread). None there is a bug in the graph, not bad input: hashing the text again
    here would hide it and cost a pass over every text."""
    if doc.split is None:
        raise RuntimeError(
            f"internal error: {doc.source}:{doc.line} reached a step without a "
            "split (cleaning.CountBySplit assigns it when the input names none)"
        )
    return doc.split


def ref(pos: tuple) -> dict:
    """A document's place, for the sample: {"source", "line", "offset"}."""
    source, offset, line = pos
    return {"source": source, "line": line, "offset": None if offset < 0 else offset}


@dataclasses.dataclass(frozen=True)
class Removed:
    rule: str  # a quality rule, or "duplicate_exact" / "duplicate_near"
    pos: tuple  # `position` of the removed document
    reason: str
    excerpt: str
    kept: tuple | None = None  # duplicates: `position` of the copy that was kept

    def to_json(self) -> str:
        record = ref(self.pos) | {"rule": self.rule, "reason": self.reason, "excerpt": self.excerpt}
        if self.kept is not None:
            record["kept"] = ref(self.kept)
        return json.dumps(record, ensure_ascii=False)
