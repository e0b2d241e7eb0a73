"""The files of one prepared output folder: the only module that spells their names.

    OUT/
      {split}/                    one per split (train, validation, test or --splits names)
        {split}-{run_id}-{index:05d}-{count}.tfrecord
                                  shards (name: common/shards.py); shard_writer writes them,
                                  the manifest lists them, trainer/data/splits.py and verify read
                                  them
        manifest.json             the commit of the split (common/manifest.py); commit.Commit
                                  writes it; the trainer (data.py, task.py, card_facts.py),
                                  common/verify.py and prepare's summary read it
        _COMPLETE                 format 1 only: the sha256 of its manifest; read for old
                                  outputs, deleted by the next commit
        .tmp-*                    a local atomic write cut short (common/fs.py); the commit
                                  deletes them
      dead_letter/
        {run_id}-dead_letter-00000-of-00001.jsonl
                                  records prepare rejected (source, line, reason), one
                                  atomic write (beam_pipelines/jsonl_files.py); manifests
                                  list them, a refusal reads their top reasons (earlier
                                  versions, through Beam's WriteToText: several files)
        {run_id}-removed_sample-00000-of-00001.jsonl
                                  a sample of what the quality rules and dedup removed
                                  (beam_pipelines/cleaning.py); listed and kept likewise
        {run_id}-low_quality-{index:05d}-of-{count:05d}.jsonl
                                  every document the quality model scored below its
                                  threshold, with its score (beam_pipelines/model_filter.py);
                                  listed and kept likewise
        beam-temp-{run_id}-*/     Beam's temporary folders of those two writes in earlier
                                  versions; the commit and a failed local run sweep a dead
                                  run's
      _runs/
        {run_id}.json             the run record (committed or refused); commit.Commit writes
                                  it, the launcher reports it, and a lock whose run recorded
                                  its end is stale (commit.run_ended)
        .tmp-*-{run_id}.json      a run record being written
      _LOCK                       one writer at a time (common/run_lock.py): the
                                  launcher takes it, the commit releases it
      .tmp-*/                     temporary folders of earlier versions; the commit deletes them

A split is one folder directly inside OUT: names starting with "." or "_", and the dead
letters' folder, are reserved for the output's own files. Nothing here reads or writes; the
modules named above do, through these paths.

Example:
    >>> split_dir("gs://b/out", "train")
    'gs://b/out/train'
    >>> run_record_path("out", "r20261122120000a1b2c3")
    'out/_runs/r20261122120000a1b2c3.json'
"""

from __future__ import annotations

from common import fs
from common.errors import UserError

MANIFEST = "manifest.json"
MARKER = "_COMPLETE"  # format 1 only
RUNS_DIR = "_runs"
DEAD_LETTER_DIR = "dead_letter"
LOCK = "_LOCK"
# The kind part of a file name in the dead letters' folder: `{run_id}-{kind}-...jsonl`.
DEAD_LETTER_KIND = "dead_letter"
SAMPLE_KIND = "removed_sample"
LOW_QUALITY_KIND = "low_quality"  # documents a quality model scored below its threshold
JSONL_SUFFIX = ".jsonl"  # after the shard numbers, as Beam's WriteToText named them
BEAM_TEMP_PREFIX = "beam-temp-"  # Beam's own name for a write's temporary folder
TEMP_GLOB = fs.TEMP_PREFIX + "*"
RESERVED_NAMES = (RUNS_DIR, DEAD_LETTER_DIR)


class SplitNameError(UserError):
    """A split name that would not be one folder of its own directly inside the output."""


def split_name_problem(name: str) -> str | None:
    """Why `name` cannot be a split folder inside an output folder, or None."""
    if not name or name != name.strip():
        return "is empty or has leading or trailing spaces"
    if "/" in name or "\\" in name or name in (".", ".."):
        return "is not a single folder name (no '/', '\\', '.' or '..')"
    if name in RESERVED_NAMES or name[0] in "._":
        return (
            f"is reserved ({', '.join(RESERVED_NAMES)} and names starting with '.' or "
            "'_' hold the output's own files)"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "holds a control character"
    return None


def check_split_name(name: str) -> str:
    """`name` if it can be a split folder, else SplitNameError with the reason."""
    problem = split_name_problem(name)
    if problem:
        raise SplitNameError(f"split name {name!r} {problem}")
    return name


def split_dir(output_dir: str, split: str) -> str:
    """The folder of one split, always directly inside `output_dir`."""
    return fs.join(output_dir, check_split_name(split))


def shard_path(output_dir: str, split: str, name: str) -> str:
    """Where the shard `name` (common/shards.py: shard_name) of `split` lies."""
    return fs.join(split_dir(output_dir, split), name)


def manifest_path(split_dir: str) -> str:
    return fs.join(split_dir, MANIFEST)


def marker_path(split_dir: str) -> str:
    return fs.join(split_dir, MARKER)


def committed_split_dirs(output_dir: str) -> list[str]:
    """The folders directly inside `output_dir` that hold a manifest, sorted."""
    found = fs.glob_in(output_dir, "*/" + MANIFEST)
    return sorted(path[: -len(MANIFEST) - 1] for path in found)


def lock_path(output_dir: str) -> str:
    return fs.join(output_dir, LOCK)


def runs_dir(output_dir: str) -> str:
    return fs.join(output_dir, RUNS_DIR)


def run_record_path(output_dir: str, run_id: str) -> str:
    return fs.join(output_dir, RUNS_DIR, f"{run_id}.json")


def dead_letter_dir(output_dir: str) -> str:
    return fs.join(output_dir, DEAD_LETTER_DIR)


def dead_letter_prefix(output_dir: str, run_id: str) -> str:
    """Where a run's rejected records go (`jsonl_files` adds `-00000-of-00001.jsonl`)."""
    return fs.join(output_dir, DEAD_LETTER_DIR, f"{run_id}-{DEAD_LETTER_KIND}")


def sample_prefix(output_dir: str, run_id: str) -> str:
    """Where a run's sample of removed documents goes (the rest added as above)."""
    return fs.join(output_dir, DEAD_LETTER_DIR, f"{run_id}-{SAMPLE_KIND}")


def low_quality_prefix(output_dir: str, run_id: str) -> str:
    """Where a run's documents below the quality model's threshold go, a line each."""
    return fs.join(output_dir, DEAD_LETTER_DIR, f"{run_id}-{LOW_QUALITY_KIND}")


def is_dead_letter_file(path: str) -> bool:
    """Whether a file of the dead letters' folder holds rejected records (not the removed
    sample, nor the low-quality documents)."""
    return f"-{DEAD_LETTER_KIND}" in path.rsplit("/", 1)[-1]


def is_sample_file(path: str) -> bool:
    """Whether a file of the dead letters' folder is a removed sample (not dead letters)."""
    return f"-{SAMPLE_KIND}" in path.rsplit("/", 1)[-1]
