"""What to read: the input flags shared by `prepare` and `train_tokenizer` (one definition),
and the listing of the files they name (globs, sizes, byte ranges for parallel reading).

Example:
    >>> spec = InputSpec(input="corpus/*.jsonl.gz", text_field="body")
    >>> spec.hf_split_list
    ['train']
"""

from __future__ import annotations

import dataclasses
import os

from beam_pipelines import sources
from common import fs
from common.errors import UserError
from common.flags import flag


@dataclasses.dataclass
class InputSpec:
    input: str = flag(
        "comma-separated paths or globs (local or gs://) of "
        ".txt/.jsonl/.parquet, optionally compressed"
    )
    text_field: str = flag("JSONL field / parquet column with the text", "text")
    txt_unit: str = flag(
        ".txt documents: one per line (as the HF example) or per blank-line paragraph",
        "line",
        choices=("line", "paragraph"),
    )
    hf_dataset: str = flag("Hugging Face dataset name, or a folder written by save_to_disk")
    hf_config: str = flag("configuration of --hf_dataset")
    hf_splits: str = flag(
        "comma-separated dataset splits, e.g. 'train,validation'", "train", aliases=["--hf_split"]
    )
    max_document_bytes: int = flag(
        "longer documents are dead-lettered", sources.DEFAULT_MAX_DOCUMENT_BYTES, minimum=1
    )

    @property
    def hf_split_list(self) -> list[str]:
        return hf_split_list(self.hf_splits)


class DuplicateSplitError(UserError):
    """A split named twice: its documents would be read twice and counted once."""


def hf_split_list(hf_splits: str) -> list[str]:
    """'train,validation' -> ['train', 'validation']; a split named twice is refused."""
    names = [s.strip() for s in hf_splits.split(",") if s.strip()]
    twice = sorted({s for s in names if names.count(s) > 1})
    if twice:
        raise DuplicateSplitError(f"--hf_splits names {', '.join(map(repr, twice))} twice")
    return names


def byte_ranges(
    path: str, size: int, txt_unit: str = "line", range_bytes: int = sources.DEFAULT_RANGE_BYTES
) -> list[tuple[int, int | None]]:
    """How to read one file in parallel: uncompressed line-per-document files larger than
    `range_bytes` are cut into byte ranges (each worker reads the lines starting in its
    range); everything else is read whole, `[(0, None)]`."""
    fmt = sources.file_format(path)
    splittable = (
        fmt == "jsonl" or (fmt == "txt" and txt_unit == "line")
    ) and not path.lower().endswith(sources.COMPRESSED_SUFFIXES)
    if not splittable or size <= range_bytes:
        return [(0, None)]
    cuts = list(range(0, size, range_bytes))
    return [(a, b) for a, b in zip(cuts, cuts[1:] + [size])]


class InputNotFoundError(UserError, FileNotFoundError):
    """An input glob that matches nothing."""


class FolderInputError(UserError):
    """An input that names a folder: its files are not read unless a glob names them."""


def check_not_folder(pattern: str, flag: str = "--input") -> None:
    """A folder given as an input would pass the listing as one 'file' (local) or as all
    the objects under it (`gs://b/dir/`), and the run would refuse it only at its end: it
    is refused here, with the glob to give instead."""
    folder = not fs.has_glob(pattern) and (
        pattern.endswith("/") or (not fs.is_remote(pattern) and os.path.isdir(pattern))
    )
    if folder:
        raise FolderInputError(
            f"{flag} {pattern!r} is a folder; name its files with a glob, "
            f"e.g. '{pattern.rstrip('/')}/*.jsonl'"
        )


def expand_inputs(patterns: str | list[str], flag: str = "--input") -> dict[str, fs.Stamp]:
    """`{path: Stamp}` (size and last write) of the files matching comma-separated globs,
    sorted by path; a clear error when a glob matches nothing or names a folder. The
    stamps come with the listing (one call per glob); readers compare them with the file
    they read (`sources.ReadDocuments`)."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p]
    found, names = {}, set()
    for pattern in patterns:
        check_not_folder(pattern, flag)
        matched = fs.glob_stamps(pattern)
        if not matched:
            raise InputNotFoundError(f"{flag} {pattern!r} matches no file")
        for path, stamp in matched.items():  # one file named two ways is read once
            if (same := fs.identity(path)) not in names:
                names.add(same)
                found[path] = stamp
    return dict(sorted(found.items()))
