"""Reading compressed files so that a cut-off file is an error, not a short file.

Beam's `CompressedFile` stops quietly where a truncated `.gz`, `.bz2` or `.zst` ends: it
never asks the decompressor whether the stream was complete, so a cut file reads as fewer
documents (and its last, cut line as a document). This reader feeds the same decompressor
objects but, when the compressed bytes run out, checks the decompressor's `eof` flag (set
only once a gzip member's trailer, a bzip2 end-of-stream marker, a zstd frame's end or a
zlib stream's end was seen) and raises `TruncatedStreamError` otherwise.

Concatenated streams (`cat a.gz b.gz`, multi-stream bzip2, several zstd frames) are read
one after the other, as gzip, bzip2 and zstd define them. An empty file is an empty stream.
"""

from __future__ import annotations

import bz2
import io
import zlib

import zstandard

_RAW_CHUNK = 1 << 20
# zstd frames may ask for windows up to 2 GiB (Beam allows the same; the default is 128 MiB).
_ZSTD_MAX_WINDOW = 1 << 31

DECOMPRESSORS = {
    ".gz": lambda: zlib.decompressobj(zlib.MAX_WBITS | 16),
    ".bz2": bz2.BZ2Decompressor,
    ".zst": lambda: zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW).decompressobj(),
    ".deflate": zlib.decompressobj,  # zlib-wrapped deflate, as Beam writes and reads it
}


class TruncatedStreamError(EOFError):
    """The compressed bytes ended inside a stream (the file was cut off)."""


def suffix_of(path: str) -> str | None:
    """The compression suffix this module reads, or None."""
    name = path.lower()
    return next((s for s in DECOMPRESSORS if name.endswith(s)), None)


class CheckedReader(io.RawIOBase):
    """A binary reader of the decompressed bytes of `raw`; raises TruncatedStreamError at
    the end of `raw` if the last stream did not end.

    Args:
        raw: the compressed bytes, a binary file object.
        suffix: the compression, by file suffix (a key of `DECOMPRESSORS`).
    """

    def __init__(self, raw, suffix: str):
        super().__init__()
        self._raw, self._new = raw, DECOMPRESSORS[suffix]
        self._decompressor, self._fed = self._new(), False
        self._pending, self._at = b"", 0  # decompressed bytes, and how many were returned

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes (all that is left for -1); b"" at the end. A read returns what
        was decompressed before a cut: the error comes with the next read, so the caller
        keeps every complete line that precedes it."""
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(_RAW_CHUNK), b""))
        while self._at == len(self._pending):
            self._pending, self._at = self._decompress_more(), 0
            if not self._pending:
                return b""  # the end of the last complete stream
        piece = self._pending[self._at : self._at + size]
        self._at += len(piece)
        return piece

    def readinto(self, buffer) -> int:
        piece = self.read(len(buffer))
        buffer[: len(piece)] = piece
        return len(piece)

    def _decompress_more(self) -> bytes:
        """The next non-empty piece of output, or b"" at a clean end."""
        while True:
            if self._decompressor.eof:  # one stream ended: what follows starts another
                data = self._decompressor.unused_data or self._raw.read(_RAW_CHUNK)
                self._decompressor, self._fed = self._new(), False
            else:
                data = self._raw.read(_RAW_CHUNK)
            if not data:
                if self._fed:
                    raise TruncatedStreamError(
                        "the compressed data ends inside a stream: the file is truncated "
                        "(no end-of-stream marker)"
                    )
                return b""
            self._fed = True
            out = self._decompressor.decompress(data)
            if out:
                return out

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


def open_checked(raw, path: str) -> CheckedReader:
    """A reader of `raw` (a binary file of `path`) decompressed by its suffix. Unbuffered on
    purpose: a buffer would swallow the bytes before a cut along with the error."""
    return CheckedReader(raw, suffix_of(path))
