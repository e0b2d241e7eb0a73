"""The manifest: one JSON per split that says what a prepared split holds, plus a marker.

Layout of a prepared split::

    {output_dir}/{split}/manifest.json
    {output_dir}/{split}/{split}-00000-{count}.tfrecord ...
    {output_dir}/{split}/_COMPLETE        # written LAST; holds the sha256 of manifest.json

A reader trusts a split only when the marker exists and matches the manifest, so a crashed
or still-running pipeline (or a rerun that died half-way) is never read as complete.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from common import fs, shards
from common.errors import UserError

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
MARKER_NAME = "_COMPLETE"


class ManifestError(UserError):
    """Prepared data that cannot be used, with one sentence that says why and what to do."""


@dataclasses.dataclass
class Shard:
    name: str  # file name inside the split folder
    num_examples: int
    num_tokens: int  # non-padding tokens


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
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict) -> "Manifest":
        data = dict(data)
        data["shards"] = [Shard(**s) for s in data["shards"]]
        return cls(**data)

    def shard_paths(self, split_dir: str) -> list[str]:
        return [fs.join(split_dir, s.name) for s in self.shards]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_manifest(split_dir: str, manifest: Manifest) -> str:
    """Writes manifest.json (not the marker); returns its sha256 for `write_marker`."""
    data = manifest.to_json().encode("utf-8")
    fs.write_bytes(fs.join(split_dir, MANIFEST_NAME), data)
    return _sha256(data)


def write_marker(split_dir: str, manifest_sha256: str) -> None:
    fs.write_bytes(fs.join(split_dir, MARKER_NAME), (manifest_sha256 + "\n").encode())


def remove_marker(split_dir: str) -> None:
    """Called before anything in a split folder changes, so half-new output never looks done."""
    fs.delete([fs.join(split_dir, MARKER_NAME)])


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
    marker_path = fs.join(split_dir, MARKER_NAME)
    manifest_path = fs.join(split_dir, MANIFEST_NAME)
    if not fs.exists(marker_path):
        raise ManifestError(
            f"{split_dir} is incomplete: it has no {MARKER_NAME} marker, so the prepare "
            "pipeline that writes it did not finish (or is still running). Rerun it."
        )
    if not fs.exists(manifest_path):
        raise ManifestError(f"{split_dir} has a {MARKER_NAME} marker but no {MANIFEST_NAME}.")
    data = fs.read_bytes(manifest_path)
    if fs.read_bytes(marker_path).decode().strip() != _sha256(data):
        raise ManifestError(
            f"{split_dir} is incomplete: {MARKER_NAME} belongs to another {MANIFEST_NAME} "
            "(a rerun was interrupted). Rerun the prepare pipeline."
        )
    try:
        manifest = Manifest.from_dict(json.loads(data))
    except (ValueError, TypeError, KeyError) as err:
        raise ManifestError(f"{manifest_path} is not a valid manifest: {err}") from None
    if manifest.format_version != FORMAT_VERSION:
        raise ManifestError(
            f"{manifest_path} has format version {manifest.format_version}; this code reads "
            f"version {FORMAT_VERSION}."
        )
    if max_length is not None and manifest.max_length != max_length:
        raise ManifestError(
            f"{split_dir} holds sequences of length {manifest.max_length}, but "
            f"{max_length} was asked for. Prepare the data again with --max_length {max_length}."
        )
    fingerprint = manifest.tokenizer.get("fingerprint")
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
    if check_shards:
        _check_shards(split_dir, manifest)
    return manifest


def _check_shards(split_dir: str, manifest: Manifest) -> None:
    present = {fs.basename(p) for p in fs.glob(fs.join(split_dir, "*" + shards.SHARD_SUFFIX))}
    missing = [s.name for s in manifest.shards if s.name not in present]
    if missing:
        raise ManifestError(
            f"{split_dir}: {len(missing)} shard(s) listed in {MANIFEST_NAME} do not exist, "
            f"first {missing[0]}. The output was modified after the pipeline finished."
        )
    total = sum(s.num_examples for s in manifest.shards)
    if total != manifest.num_examples:
        raise ManifestError(
            f"{manifest_path_of(split_dir)}: shards hold {total} examples but the manifest "
            f"says {manifest.num_examples}."
        )


def manifest_path_of(split_dir: str) -> str:
    return fs.join(split_dir, MANIFEST_NAME)
