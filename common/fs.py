"""Filesystem helpers that behave the same for local paths and `gs://` URLs.

Backed by Beam's `FileSystems` (installed on both halves), so the pipeline workers do
not need TensorFlow's gfile; where Beam is not installed, by common/local_files.py (local
paths only). The trainer's tf.data input reads shards with TensorFlow's
own filesystem; everything else (manifests, tokenizer files) goes through here.
"""

from __future__ import annotations

import glob as local_glob
import json
import os
import posixpath
import re
import shutil
import uuid
import warnings
from typing import NamedTuple

from common import decompress, staging
from common.staging import TEMP_PREFIX  # re-exported: fs.TEMP_PREFIX

try:
    from apache_beam.io.filesystem import BeamIOError, CompressionTypes
    from apache_beam.io.filesystems import FileSystems
except ImportError:  # the trainer on a machine without Beam: local paths (common/local_files)
    from common.local_files import BeamIOError, CompressionTypes, FileSystems


def is_remote(path: str) -> bool:
    return "://" in path


def join(base: str, *parts: str) -> str:
    return FileSystems.join(base, *parts) if is_remote(base) else posixpath.join(base, *parts)


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def exists(path: str) -> bool:
    return FileSystems.exists(path)


_GLOB_CHARS = frozenset("*?[")


def escape_glob(path: str) -> str:
    """`path` as a glob that matches only itself: `out/prep[ab]` -> `out/prep[[]ab]`.

    Beam's patterns (and Python's glob) have no escape character, but a one-character
    class is literal; every path a user gives is a name, never a pattern, unless a flag
    says it is a glob (--input, --splits)."""
    return "".join(f"[{c}]" if c in _GLOB_CHARS else c for c in path)


def _quiet_match(call, *args):
    """escape_glob's `[[]` is exact in Beam's patterns; Python's re only warns that a future
    version might read `[[` as a nested set."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Possible nested set", category=FutureWarning)
        return call(*args)


class Stamp(NamedTuple):
    """What tells one version of a file from another: its size and when it was last written
    (local: the modification time; object stores: the object's update time, which every
    rewrite, a new generation, changes)."""

    size: int
    updated: float


def has_glob(pattern: str) -> bool:
    return any(c in _GLOB_CHARS for c in pattern)


def glob_stamps(pattern: str) -> dict[str, Stamp]:
    """`{path: Stamp}` for a glob, from one listing (no call per file).

    Beam lists the folder before a pattern's first glob character; for a local relative
    pattern with none (`*.jsonl`, `part-?/x.txt`) that folder is '', which it finds empty,
    so such a pattern is matched as `./PATTERN` and its paths given back without `./`."""
    here = (
        not is_remote(pattern)
        and has_glob(pattern)
        and "/" not in re.match(r"[^*?\[]*", pattern).group(0)
    )
    result = _quiet_match(FileSystems.match, ["./" + pattern if here else pattern])[0]
    return {
        m.path[2:] if here else m.path: Stamp(m.size_in_bytes, m.last_updated_in_seconds)
        for m in result.metadata_list
    }


def glob_sizes(pattern: str) -> dict[str, int]:
    """`{path: size in bytes}` for a glob, from one listing (no call per file)."""
    return {path: stamp.size for path, stamp in glob_stamps(pattern).items()}


def stamp(path: str) -> Stamp | None:
    """The `Stamp` of one file (None when it is absent), its name taken literally."""
    return glob_stamps(escape_glob(path)).get(path)


def glob(pattern: str) -> list[str]:
    """Sorted paths matching a glob (an empty list when nothing matches)."""
    return sorted(glob_sizes(pattern))


def glob_in(folder: str, pattern: str) -> list[str]:
    """Sorted paths matching `pattern` inside `folder`, whose own name is taken literally."""
    return glob(join(escape_glob(folder), pattern))


def glob_sizes_in(folder: str, pattern: str) -> dict[str, int]:
    """`glob_sizes` of `pattern` inside `folder`, whose own name is taken literally."""
    return glob_sizes(join(escape_glob(folder), pattern))


def size(path: str) -> int:
    """The size of one file (0 when it is absent), its name taken literally."""
    return glob_sizes(escape_glob(path)).get(path, 0)


def open_read(path: str, compressed: bool = False):
    """A binary reader; `.gz`/`.bz2`/`.zst`/`.deflate` are decompressed when `compressed` is
    True, and a truncated one raises `decompress.TruncatedStreamError` (an EOFError) where
    it ends (Beam's own decompressing reader just stops there)."""
    raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    if compressed and decompress.suffix_of(path):
        return decompress.open_checked(raw, path)
    return raw


def open_write(path: str):
    """A binary writer; parent folders are created where the filesystem has them."""
    return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)


def read_bytes(path: str) -> bytes:
    with open_read(path) as f:
        return f.read()


def write_bytes(path: str, data: bytes) -> None:
    """Writes a whole file atomically: readers see the old content or the new, never a part."""
    upload_stream(path, [data])


def upload_stream(path: str, chunks) -> None:
    """Writes the concatenated `chunks` to `path` atomically.

    Local: a temporary file in the same folder, then `os.replace` (atomic on one filesystem).
    Object stores: one upload, which creates the object only when `close()` completes; on an
    error the writer is deliberately not closed, so no partial object is ever committed.
    """
    if is_remote(path):
        writer = open_write(path)
        for chunk in chunks:
            writer.write(chunk)
        writer.close()
        return
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temp = os.path.join(folder, temp_name(path))
    try:
        with open(temp, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        os.replace(temp, path)
    except OSError as err:
        if err.filename is None:  # write(2) names no file: say which one could not be written
            raise OSError(err.errno, err.strerror, path) from err
        raise
    finally:
        if os.path.exists(temp):
            os.remove(temp)


def temp_name(path: str) -> str:
    """The name of a local atomic write's temporary file for `path` (unique per write)."""
    return f"{TEMP_PREFIX}{uuid.uuid4().hex}-{basename(path)}"


def file_chunks(local_path: str, size: int = 64 << 20):
    """A local file's bytes in pieces (for `upload_stream` of large files)."""
    with open(local_path, "rb") as f:
        while chunk := f.read(size):
            yield chunk


def read_json(path: str):
    return json.loads(read_bytes(path).decode("utf-8"))


def write_json(path: str, obj) -> None:
    write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def delete(paths: list[str]) -> None:
    """Deletes files, each name taken literally (Beam's delete expands globs); missing ones
    (or ones another process deletes meanwhile) are ignored, so a repeated or concurrent
    cleanup is harmless."""
    present = [p for p in dict.fromkeys(paths) if exists(p)]
    local = [p for p in present if not is_remote(p)]
    for path in local:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    remote = [escape_glob(p) for p in present if is_remote(p)]
    if not remote:
        return
    try:
        _quiet_match(FileSystems.delete, remote)
    except BeamIOError as err:
        failures = (err.exception_details or {}).values()
        if not all(_is_missing(e) for e in failures):
            raise


def _is_missing(error) -> bool:
    """Beam wraps the cause: OSError(FileNotFoundError(...)) locally, a 404 on GCS."""
    cause = error.args[0] if getattr(error, "args", None) else None
    return (
        isinstance(error, FileNotFoundError)
        or isinstance(cause, FileNotFoundError)
        or "404" in str(error)
    )


def delete_tree(path: str) -> None:
    """Deletes a folder (a prefix on object stores) and everything under it."""
    path = path.rstrip("/")
    if is_remote(path):
        delete(glob_in(path, "**"))
    elif os.path.isdir(path):
        shutil.rmtree(path)


def remove_empty_folder(path: str) -> None:
    """Removes a local folder if it is empty (object stores have no folders to remove)."""
    if not is_remote(path) and os.path.isdir(path) and not os.listdir(path):
        os.rmdir(path)


def delete_trees_in(folder: str, pattern: str) -> None:
    """Deletes every folder (object-store prefix) inside `folder` (a literal name) whose
    name matches the glob `pattern`."""
    if is_remote(folder):
        delete(glob_in(folder, pattern.rstrip("/") + "/**"))
        return
    for path in local_glob.glob(os.path.join(local_glob.escape(folder), pattern)):
        delete_tree(path)


def copy(sources: list[str], destinations: list[str]) -> None:
    """Copies each source to its destination (server side on object stores), names taken
    literally."""
    FileSystems.copy(sources, destinations)


def local_copy(path: str, local_path: str) -> None:
    with open(local_path, "wb") as f:
        f.write(read_bytes(path))


def identity(path: str) -> str:
    """What names the same file or folder as `path`, for comparing paths the user gave:
    locally the real path (symlinks, `.`, `..` and doubled slashes resolved); on object
    stores the bucket and the object name with `.`, `..` and empty segments collapsed
    (stricter than the store, whose names are literal: two names that differ only so are
    treated as one, which can only refuse a run, never mix splits)."""
    if not is_remote(path):
        return os.path.realpath(path)
    scheme, _, rest = path.partition("://")
    bucket, _, name = rest.partition("/")
    name = posixpath.normpath("/" + name).lstrip("/") if name.strip("/") else ""
    return f"{scheme}://{bucket}/{name}"


def files_under(folder: str) -> list[str]:
    """Every file under a folder (an object-store prefix), at any depth."""
    if is_remote(folder):
        return glob_in(folder, "**")
    return [os.path.join(root, f) for root, _, files in os.walk(folder) for f in files]


_STAGE = staging.STAGED


def unstaged(path: str) -> str:
    """`path` with a staging folder's name (`.tmp-{uuid}-NAME`) read as NAME: what to show a
    user, who knows the folder they named."""
    return _STAGE.sub("", path)
