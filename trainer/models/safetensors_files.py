"""transformers' safetensors checkpoints, one file or sharded, read without trusting them.

The format: an 8-byte little-endian header length N, N bytes of JSON (per tensor its dtype,
shape and `data_offsets` [begin, end) counted from the end of the header), then the raw
little-endian bytes. Before any tensor is read, the header length is checked against the file
size (a truncated, zeroed or foreign file would otherwise give a JSON error, or an absurd length
a huge allocation) and every tensor's extent against the file and its shape, so that a bad
file is one line naming it and what is wrong.

A sharded checkpoint (`save_pretrained(..., max_shard_size=...)`) has
`model.safetensors.index.json`, whose `weight_map` maps each tensor name to its shard file
in the same folder; each shard is checked as above, and every name must be in its shard.

Example:
    >>> files = checkpoint_files("exports/tiny/hf")       # [".../model.safetensors"]
    >>> dtypes(files)["lm_head.bias"]
    'F32'
    >>> read_floats(files)["lm_head.bias"].shape
    (100,)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import struct

import numpy as np

from common import fs
from common.errors import UserError

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
SHARD_PATTERN = "model-*.safetensors"  # transformers' shard names: model-00001-of-00002...
HEADER_LIMIT = 100_000_000  # the safetensors library's own limit on the JSON header
_ITEMSIZE = {
    **dict.fromkeys(("F64", "I64", "U64"), 8),
    **dict.fromkeys(("F32", "I32", "U32"), 4),
    **dict.fromkeys(("F16", "BF16", "I16", "U16"), 2),
    **dict.fromkeys(("I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2"), 1),
}
FLOATS = ("F32", "F16", "BF16")


class SafetensorsError(UserError):
    """A safetensors file or index that cannot be read as one; one line naming it."""


@dataclasses.dataclass(frozen=True)
class Entry:
    dtype: str
    shape: tuple
    start: int  # absolute byte offsets in the file
    end: int


def checkpoint_files(folder: str) -> list[str] | None:
    """The weight files of a transformers folder: `model.safetensors`, else the shards its
    index names (checked to exist, in the folder); None when it has neither."""
    if fs.exists(fs.join(folder, SINGLE)):
        return [fs.join(folder, SINGLE)]
    index = fs.join(folder, INDEX)
    if not fs.exists(index):
        return None
    shards = sorted(set(_weight_map(index).values()))
    for shard in shards:
        if not fs.exists(fs.join(folder, shard)):
            raise SafetensorsError(f"{index} names the shard {shard}, which is not in {folder}")
    return [fs.join(folder, shard) for shard in shards]


def _weight_map(index: str) -> dict:
    try:
        weight_map = fs.read_json(index).get("weight_map")
    except (ValueError, AttributeError) as err:
        raise SafetensorsError(f"{index} is not a safetensors index (JSON object): {err}") from None
    if not isinstance(weight_map, dict) or not weight_map:
        raise SafetensorsError(f"{index} has no weight_map of tensor names to shard files")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or os.path.basename(shard) != shard or shard in ("", ".."):
            raise SafetensorsError(
                f"{index}: tensor {name} is mapped to {shard!r}, not a file in its folder"
            )
    return weight_map


def header(path: str) -> dict[str, Entry]:
    """Every tensor's entry in `path`'s header, each checked against the file's size."""
    size = fs.size(path)
    with fs.open_read(path) as f:
        if size < 8:
            raise SafetensorsError(f"{path} is {size} bytes: too short for a safetensors file")
        length = struct.unpack("<Q", f.read(8))[0]
        if length > min(size - 8, HEADER_LIMIT):
            raise SafetensorsError(
                f"{path}: its header length field says {length} bytes, but the file holds "
                f"{size - 8} after it (truncated, or not a safetensors file)"
            )
        raw = f.read(length)
    try:
        found = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise SafetensorsError(
            f"{path}: its header is not JSON ({err}); not a safetensors file"
        ) from None
    if not isinstance(found, dict):
        raise SafetensorsError(f"{path}: its header is not a JSON object")
    base = 8 + length
    return {
        name: _entry(path, name, value, base, size)
        for name, value in found.items()
        if name != "__metadata__"
    }


def _entry(path: str, name: str, value, base: int, size: int) -> Entry:
    try:
        dtype, shape, (begin, end) = value["dtype"], tuple(value["shape"]), value["data_offsets"]
        valid = (
            dtype in _ITEMSIZE
            and all(isinstance(n, int) and n >= 0 for n in (*shape, begin, end))
            and begin <= end
        )
    except (TypeError, KeyError, ValueError):
        valid = False
    if not valid:
        raise SafetensorsError(f"{path}: tensor {name}'s header entry is malformed: {value!r:.120}")
    if end - begin != math.prod(shape) * _ITEMSIZE[dtype]:
        raise SafetensorsError(
            f"{path}: tensor {name} ({dtype}, shape {list(shape)}) spans {end - begin} bytes, "
            f"not the {math.prod(shape) * _ITEMSIZE[dtype]} its shape needs"
        )
    if base + end > size:
        raise SafetensorsError(
            f"{path}: tensor {name} ends at byte {base + end}, past the file's end ({size} "
            "bytes): the file is truncated"
        )
    return Entry(dtype, shape, base + begin, base + end)


def headers(files: list[str]) -> dict[str, tuple[str, Entry]]:
    """name -> (file, entry) over every file of a checkpoint; a name in two shards, or one
    the index puts in a shard that lacks it, is refused."""
    found = {}
    for path in files:
        for name, entry in header(path).items():
            if name in found:
                raise SafetensorsError(f"{path}: tensor {name} is also in {found[name][0]}")
            found[name] = (path, entry)
    folder = os.path.dirname(files[0])
    index = fs.join(folder, INDEX)
    if len(files) > 1 or os.path.basename(files[0]) != SINGLE:
        for name, shard in _weight_map(index).items():
            if name not in found or os.path.basename(found[name][0]) != shard:
                raise SafetensorsError(f"{index} puts {name} in {shard}, which does not hold it")
    return found


def dtypes(files: list[str]) -> dict[str, str]:
    """name -> dtype string, from the headers (no tensor is read)."""
    return {name: entry.dtype for name, (_, entry) in headers(files).items()}


def read_floats(files: list[str]) -> dict[str, np.ndarray]:
    """Every float tensor as float32 (bfloat16 too, which NumPy and `safetensors.numpy`
    cannot hold), each file read once after its header is checked."""
    by_file = {}
    for name, (path, entry) in headers(files).items():
        if entry.dtype in FLOATS:
            by_file.setdefault(path, []).append((name, entry))
    tensors = {}
    for path, entries in by_file.items():
        data = fs.read_bytes(path)
        for name, entry in entries:
            raw = data[entry.start : entry.end]
            if entry.dtype == "BF16":  # the upper half of a float32
                array = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                array = np.frombuffer(raw, "<f4" if entry.dtype == "F32" else "<f2")
            tensors[name] = array.astype(np.float32).reshape(entry.shape)
    return tensors
