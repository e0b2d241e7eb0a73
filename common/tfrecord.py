"""The TFRecord container format, written and checked without TensorFlow.

Each record is framed as

    uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)

(little-endian; the mask rotates the CRC-32C right by 15 bits and adds 0xa282ead8, TensorFlow's
`tsl/lib/hash/crc32c.h`). The prepare pipeline writes shards with `frame`, `common.verify`
checks them with `records`, and TensorFlow's `TFRecordDataset` reads them in the trainer
(tests/common/test_tfrecord.py checks both ways). Hand-written because no maintained library
offers TensorFlow-free TFRecord framing: Beam has one, but in a private class.

Example:
    >>> data = frame([b"a", b"bc"])
    >>> list(records(io.BytesIO(data)))
    [b'a', b'bc']
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import google_crc32c

_LENGTH = struct.Struct("<QI")  # length, its masked crc
_CRC = struct.Struct("<I")
HEADER_BYTES = _LENGTH.size
OVERHEAD_BYTES = HEADER_BYTES + _CRC.size  # 16 bytes around each record's data


class RecordError(ValueError):
    """Bytes that are not a whole, intact TFRecord; the message says which part is wrong."""


def masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(records: Iterable[bytes]) -> bytes:
    """The TFRecord bytes of `records`, in order."""
    parts = []
    for record in records:
        length = struct.pack("<Q", len(record))
        parts += [length, _CRC.pack(masked_crc(length)), record, _CRC.pack(masked_crc(record))]
    return b"".join(parts)


def records(stream: BinaryIO) -> Iterator[bytes]:
    """Each record's data, both checksums checked; `RecordError` at the first bad one."""
    while True:
        header = stream.read(HEADER_BYTES)
        if not header:
            return
        if len(header) < HEADER_BYTES:
            raise RecordError(f"cut short: {len(header)} of a record header's {HEADER_BYTES} bytes")
        length, length_crc = _LENGTH.unpack(header)
        if masked_crc(header[:8]) != length_crc:
            raise RecordError("bad length checksum")
        body = stream.read(length + _CRC.size)
        if len(body) < length + _CRC.size:
            raise RecordError(f"cut short: {len(body)} of {length + _CRC.size} data bytes")
        data = body[:length]
        if masked_crc(data) != _CRC.unpack(body[length:])[0]:
            raise RecordError("bad data checksum")
        yield data


def skip(stream: BinaryIO, count: int) -> int:
    """Moves past `count` records reading only their headers (the length checksum checked; the
    data's is left to the reader that keeps the record: a host skips the records of the
    others); returns how many it passed (fewer at the end of the stream)."""
    for done in range(count):
        header = stream.read(HEADER_BYTES)
        if not header:
            return done
        if len(header) < HEADER_BYTES:
            raise RecordError(f"cut short: {len(header)} of a record header's {HEADER_BYTES} bytes")
        length, length_crc = _LENGTH.unpack(header)
        if masked_crc(header[:8]) != length_crc:
            raise RecordError("bad length checksum")
        stream.seek(length + _CRC.size, io.SEEK_CUR)
    return count
