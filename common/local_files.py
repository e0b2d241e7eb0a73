"""Local paths without Apache Beam: the part of Beam's `FileSystems` that common/fs.py uses,
for a machine that has the trainer but not Beam (the borrowed GPU machine, which gets only a
few carried wheels: docs/benchmarks.md "On the GPU machine"). Where Beam is installed, fs.py
uses Beam itself; tests/common/test_local_files.py checks that both answer alike.

The semantics are those of Beam's local filesystem for what fs.py asks: `match` of a pattern
without glob characters gives the path itself if it exists; otherwise every file (not
folder) under the folder before the first glob character, at any depth, whose path the
pattern matches, `*` and `?` within one path segment, `**` across segments, `[...]` a
character class (`[!...]` its complement). Remote paths (gs://) need Beam: one line says so.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from common.errors import UserError


class BeamIOError(IOError):
    """Beam's error of a batch operation (remote only here), for fs.py's `except`."""

    def __init__(self, message: str, exception_details: dict | None = None):
        super().__init__(message)
        self.exception_details = exception_details


class CompressionTypes:
    UNCOMPRESSED = "uncompressed"


class FileMetadata(NamedTuple):
    path: str
    size_in_bytes: int
    last_updated_in_seconds: float


class MatchResult(NamedTuple):
    pattern: str
    metadata_list: list


def _local(path: str) -> str:
    if "://" in path:
        raise UserError(
            f"{path}: paths like this one need apache-beam (its filesystems), "
            "which this machine lacks; use a local path or install apache-beam."
        )
    return path


def pattern_regex(pattern: str) -> re.Pattern:
    """The regular expression of a glob pattern, as described above."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        char, first = pattern[i], i + 2 if pattern.startswith("[!", i) else i + 1
        end = pattern.find("]", first + 1 if pattern[first : first + 1] == "]" else first)
        if char == "[" and end > 0:
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            body = (
                "^" + body[1:]
                if body.startswith("!")
                else ("\\" + body if body.startswith("^") else body)
            )
            out.append(f"[{body}]")
            i = end + 1
            continue
        out.append({"*": "[^/]*", "?": "."}.get(char, re.escape(char)))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _match(pattern: str) -> list[FileMetadata]:
    if pattern.endswith("/"):
        pattern += "*"
    prefix = re.match(r"[^\[*?]*", pattern).group(0)
    if prefix == pattern:
        paths = [pattern] if os.path.exists(pattern) else []
    else:  # Beam lists the folder the prefix names (none for a relative bare pattern)
        folder, regex = os.path.dirname(prefix), pattern_regex(pattern)
        paths = (
            [
                path
                for root, _, names in os.walk(folder)
                for name in names
                if regex.match(path := os.path.join(root, name))
            ]
            if os.path.isdir(folder)
            else []
        )
    found = []
    for path in paths:
        try:
            found.append(FileMetadata(path, os.path.getsize(path), os.path.getmtime(path)))
        except OSError:  # deleted meanwhile
            pass
    return found


class FileSystems:
    """The static methods of Beam's `FileSystems` that fs.py calls, local paths only."""

    @staticmethod
    def exists(path: str) -> bool:
        return os.path.exists(_local(path))

    @staticmethod
    def match(patterns: list[str], limits=None) -> list[MatchResult]:
        return [MatchResult(p, _match(_local(p))) for p in patterns]

    @staticmethod
    def open(path: str, compression_type=None):
        return open(_local(path), "rb")

    @staticmethod
    def create(path: str, compression_type=None):
        folder = os.path.dirname(_local(path))
        if folder:
            os.makedirs(folder, exist_ok=True)
        return open(path, "wb")

    @staticmethod
    def delete(paths: list[str]) -> None:  # fs.py deletes only remote paths through here
        for path in paths:
            _local(path)
        raise UserError("FileSystems.delete is for remote paths, which need apache-beam")

    @staticmethod
    def copy(sources: list[str], destinations: list[str]) -> None:  # remote only, likewise
        FileSystems.delete(sources)
