"""JSONL task files read as a stream, each line checked: the one reader of pair files
(`pairs.py`) and BEIR's corpus and queries (`retrieval/beir.py`).

Example:
    >>> for number, row in rows("pairs.jsonl"):   # (line number, dict); blank lines skipped
    ...     row["query"]
"""

from __future__ import annotations

import codecs

import orjson

from common import fs
from common.errors import UserError


def one_line(text) -> str:
    """`text` with its whitespace runs (newlines included) as single spaces: for messages."""
    return " ".join(str(text).split())


def rows(path: str):
    """(line number, object) for every non-blank line of a JSONL file; a line that is not a
    JSON object is one UserError naming the file and line."""
    with fs.open_read(path) as stream:
        for number, line in enumerate(stream, start=1):
            if number == 1:
                line = line.removeprefix(codecs.BOM_UTF8)
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)  # also refuses bytes that are not UTF-8
            except orjson.JSONDecodeError as err:
                raise UserError(
                    f"{path} line {number} is not JSON: {one_line(err.msg)} (column {err.colno})"
                ) from None
            if not isinstance(row, dict):
                raise UserError(f"{path} line {number} is not a JSON object")
            yield number, row
