"""The manifest: one JSON per split that says what a prepared split holds; writing it is the
commit of that split.

Layout of a prepared split (every name: common/prepared_dir.py)::

    {output_dir}/{split}/manifest.json
    {output_dir}/{split}/{split}-{run_id}-{index:05d}-{count}.tfrecord ...

What a reader may assume at every instant (the protocol is in beam_pipelines/commit.py):

- `manifest.json` is written in one atomic step (one object upload on gs://, a rename
  locally), after every shard it lists is complete, and lists each shard's name, record
  count, byte size and crc32c. So a reader sees the previous complete output or the new one,
  never a mix and never a half-written run.
- Shard names carry the run id: a run never overwrites a file an earlier manifest lists, and
  files of earlier runs are deleted only after a newer manifest is committed. Files that no
  manifest lists (a crashed run's, or an old run's until cleanup) are never read.
- Format 1 manifests (earlier versions of this code) were trusted only with a `_COMPLETE`
  marker holding their sha256; they are still read that way.
- Format 3 added `mixture` (what each named source of `prepare --sources` gave: documents,
  tokens, repeats, cuts, weight, realised share; {} without sources) and the accounting's
  `documents_cut` and `documents_repeated`. Format 2 manifests (no `mixture`) are read as
  having none; every format 2 or 3 shard entry records its size and crc32c.
- Format 4 added `decontamination` (what `prepare --decontaminate` checked: n, normalisation,
  action, per evaluation set its files with their sha256, texts read and documents matched;
  {} without it) and the accounting's `documents_contaminated`. Formats 2 and 3 are read as
  having none.
- Format 5 added `quality_model` (what `prepare --quality_model` scored with: the model's kind,
  sha256 and labels, the threshold, the score quantiles, documents scored, kept and removed;
  {} without it) and the accounting's `documents_low_quality`. Formats 2 to 4 are read as
  having none. (A reader that predates a field refuses a manifest holding it, so each added
  field is a new format.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import posixpath

from common import fs, prepared_dir, shards
from common.errors import UserError
from common.prepared_dir import MANIFEST, MARKER

FORMAT_VERSION = 5
LEGACY_MARKED_VERSION = 1  # manifests that need the _COMPLETE marker
READABLE_VERSIONS = (LEGACY_MARKED_VERSION, 2, 3, 4, FORMAT_VERSION)


class ManifestError(UserError):
    """Prepared data that cannot be used, with one sentence that says why and what to do."""


@dataclasses.dataclass
class Shard:
    name: str  # file name inside the split folder
    num_examples: int
    num_tokens: int  # non-padding tokens
    num_bytes: int = -1  # -1: unknown (format 1)
    crc32c: str = ""  # of the whole file, 8 hex digits ("" in format 1)


@dataclasses.dataclass
class Manifest:
    split: str
    max_length: int
    num_examples: int
    num_tokens: int  # non-padding tokens written
    shards: list[Shard]
    tokenizer: dict  # fingerprint, vocab_size, special_token_ids, path
    pipeline_args: dict
    accounting: dict  # documents and tokens in / written / dropped, see beam_pipelines
    run_id: str = ""  # the prepare run that committed this manifest
    dead_letter_files: list = dataclasses.field(default_factory=list)  # paths, this run's
    format_version: int = FORMAT_VERSION
    # Per named source (prepare --sources): plan and counts; {} without (and in format 2).
    mixture: dict = dataclasses.field(default_factory=dict)
    # What prepare --decontaminate checked and found; {} without (and in formats 2 and 3).
    decontamination: dict = dataclasses.field(default_factory=dict)
    # What prepare --quality_model scored with and kept; {} without (and in formats 2 to 4).
    quality_model: dict = dataclasses.field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict) -> Manifest:
        """The manifest in `data`; TypeError (one sentence) for a count that is not an integer
        or a name that is not a string: readers do arithmetic on them."""
        data = dict(data)
        data["shards"] = [Shard(**s) for s in data["shards"]]
        found = cls(**data)
        _check_types(found)
        return found

    def shard_paths(self, split_dir: str) -> list[str]:
        return [fs.join(split_dir, s.name) for s in self.shards]


def _check_types(found: Manifest) -> None:
    records = [
        (
            "",
            found,
            ("max_length", "num_examples", "num_tokens", "format_version"),
            ("split", "run_id"),
        )
    ]
    records += [
        (f"shards[{i}].", shard, ("num_examples", "num_tokens", "num_bytes"), ("name", "crc32c"))
        for i, shard in enumerate(found.shards)
    ]
    for where, record, counts, names in records:
        for name in counts:
            value = getattr(record, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{where}{name} is {json.dumps(value)}, not an integer")
        for name in names:
            if not isinstance(getattr(record, name), str):
                raise TypeError(
                    f"{where}{name} is {json.dumps(getattr(record, name))}, not a string"
                )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_manifest(split_dir: str, manifest: Manifest) -> str:
    """Commits a split: writes manifest.json atomically; returns its sha256."""
    data = manifest.to_json().encode("utf-8")
    fs.write_bytes(prepared_dir.manifest_path(split_dir), data)
    return _sha256(data)


def write_marker(split_dir: str, manifest_sha256: str) -> None:
    """The completion marker of format 1 (tests of backward compatibility write it)."""
    fs.write_bytes(prepared_dir.marker_path(split_dir), (manifest_sha256 + "\n").encode())


def try_read(split_dir: str) -> Manifest | None:
    """The split's committed manifest, or None if there is none that parses (no checks)."""
    path = prepared_dir.manifest_path(split_dir)
    try:
        return Manifest.from_dict(json.loads(fs.read_bytes(path)))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def read_manifest(
    split_dir: str,
    *,
    max_length: int | None = None,
    tokenizer_fingerprint: str | None = None,
    vocab_size: int | None = None,
    check_shards: bool = True,
) -> Manifest:
    """Reads and validates a split's manifest; raises ManifestError with one clear reason."""
    split_dir = split_dir.rstrip("/")
    manifest = _read_committed(split_dir)
    if max_length is not None and manifest.max_length != max_length:
        raise ManifestError(
            f"{split_dir} holds sequences of length {manifest.max_length}, but "
            f"{max_length} was asked for. Prepare the data again with --max_length {max_length}."
        )
    _check_tokenizer(split_dir, manifest, tokenizer_fingerprint, vocab_size)
    if check_shards:
        _check_shards(split_dir, manifest)
    return manifest


def _read_committed(split_dir: str) -> Manifest:
    """The split's manifest, committed, parsed and of a format this code reads."""
    manifest_path = prepared_dir.manifest_path(split_dir)
    if not fs.exists(manifest_path):
        raise ManifestError(
            f"{split_dir} is incomplete: it has no {MANIFEST}, so no prepare run has "
            "committed it (one may have failed or still be running). Rerun the pipeline."
        )
    data = fs.read_bytes(manifest_path)
    try:
        manifest = Manifest.from_dict(json.loads(data))
    except (ValueError, TypeError, KeyError) as err:
        raise ManifestError(f"{manifest_path} is not a valid manifest: {err}") from None
    if manifest.format_version == LEGACY_MARKED_VERSION:
        _check_legacy_marker(split_dir, data)
    elif manifest.format_version not in READABLE_VERSIONS:
        raise ManifestError(
            f"{manifest_path} has format version {manifest.format_version}; this code reads "
            f"versions {', '.join(map(str, READABLE_VERSIONS))}."
        )
    return manifest


def _check_tokenizer(
    split_dir: str,
    manifest: Manifest,
    tokenizer_fingerprint: str | None,
    vocab_size: int | None,
) -> None:
    """The manifest's tokenizer record is one, and names the tokenizer asked for (if any)."""
    manifest_path = prepared_dir.manifest_path(split_dir)
    if not isinstance(manifest.tokenizer, dict):
        raise ManifestError(
            f"{manifest_path} is not a valid manifest: its tokenizer record "
            f"is {type(manifest.tokenizer).__name__}, not an object"
        )
    fingerprint = manifest.tokenizer.get("fingerprint")
    if tokenizer_fingerprint is not None and not isinstance(fingerprint, str):
        raise ManifestError(
            f"{manifest_path} records no tokenizer fingerprint, so it cannot be checked "
            "against the tokenizer in use. Prepare the data again with this code."
        )
    if tokenizer_fingerprint is not None and fingerprint != tokenizer_fingerprint:
        raise ManifestError(
            f"{split_dir} was tokenized with another tokenizer (sha256 {fingerprint[:12]}…, "
            f"expected {tokenizer_fingerprint[:12]}…). Use the tokenizer it was prepared with."
        )
    if vocab_size is not None and manifest.tokenizer.get("vocab_size") != vocab_size:
        raise ManifestError(
            f"{split_dir} has vocabulary size {manifest.tokenizer.get('vocab_size')}, "
            f"but the model expects {vocab_size}."
        )


def mixed_runs(run_ids: dict) -> str | None:
    """Why split folders of one prepared output ({split folder: the run id its manifest
    records}) are not one prepare run's output, or None. A run commits its splits one
    manifest at a time, and a run commits every split it writes (deleting the others), so
    two run ids mean a rerun whose later manifest write failed (full disk, kill): its new
    splits lie beside an old run's, whose documents were split otherwise, and the evaluation
    split is no longer held out from the training corpus."""
    runs = {}
    for split_dir, run_id in sorted(run_ids.items()):
        runs.setdefault(run_id, []).append(fs.basename(split_dir) + "/")
    if len(runs) < 2:
        return None
    where = posixpath.dirname(next(iter(run_ids)).rstrip("/")) or "."  # the output folder
    parts = "; ".join(
        f"{', '.join(names)} from run {run_id or '(unnamed)'}"
        for run_id, names in sorted(runs.items())
    )
    return (
        f"{where} mixes splits of different prepare runs ({parts}): a rerun did not "
        "finish its commit, so the evaluation split is not held out from that corpus. "
        "Rerun the prepare pipeline on it."
    )


def _check_legacy_marker(split_dir: str, data: bytes) -> None:
    marker_path = prepared_dir.marker_path(split_dir)
    if not fs.exists(marker_path) or fs.read_bytes(marker_path).decode().strip() != _sha256(data):
        raise ManifestError(
            f"{split_dir} is incomplete: its format-1 {MANIFEST} has no matching "
            f"{MARKER} marker (a run was interrupted). Rerun the prepare pipeline."
        )


def _check_shards(split_dir: str, manifest: Manifest) -> None:
    """Every listed shard exists with its recorded size (one listing; no file is opened)."""
    sizes = {
        fs.basename(p): n for p, n in fs.glob_sizes_in(split_dir, "*" + shards.SHARD_SUFFIX).items()
    }
    missing = [s.name for s in manifest.shards if s.name not in sizes]
    if missing:
        raise ManifestError(
            f"{split_dir}: {len(missing)} shard(s) listed in {MANIFEST} do not exist, "
            f"first {missing[0]}. The output was modified after the pipeline finished."
        )
    wrong = [s for s in manifest.shards if s.num_bytes >= 0 and sizes[s.name] != s.num_bytes]
    if wrong:
        raise ManifestError(
            f"{fs.join(split_dir, wrong[0].name)} has {sizes[wrong[0].name]} bytes, but "
            f"{MANIFEST} says {wrong[0].num_bytes}: the file was damaged or replaced. "
            "Rerun the prepare pipeline (python -m common.verify checks every shard)."
        )
    total = sum(s.num_examples for s in manifest.shards)
    if total != manifest.num_examples:
        raise ManifestError(
            f"{prepared_dir.manifest_path(split_dir)}: shards hold {total} examples but the "
            f"manifest says {manifest.num_examples}."
        )
