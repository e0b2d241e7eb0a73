"""The commit of a prepare run: refuse a useless result, commit each split, clean up, record.

What a reader may assume at every instant: each split folder holds the previous complete
output or the new one (see common/manifest.py), never a mix. How this step keeps that (the
names of every file it writes or deletes: common/prepared_dir.py):

1. Shards were written under run-unique names, which no committed manifest lists.
2. `Commit` (one call per run, on a worker; Dataflow may retry it or run it twice) first
   confirms, by a conditional write, that the output's lock still names this run: a run
   whose lock was taken over never commits.
3. It refuses a useless result (an input file that changed while the run read it, an
   asked-for split with no sequence, more than --max_rejected_fraction of the documents
   rejected, or more than --max_filtered_fraction removed by the quality rules): this run's
   files are deleted and the previous output is left exactly as it was.
4. Otherwise it writes each split's manifest.json: one atomic write, the commit of that
   split. Only then are files that no committed manifest lists deleted (earlier runs',
   crashed runs'), splits an earlier run wrote and this one does not (only folders
   whose manifest.json is ours), and the temporary files of runs that are over (killed
   before Beam or an atomic write removed them: `sweep_dead_runs`).
5. It writes the run record `_runs/{run_id}.json` (what the launcher reports) and releases
   the lock. Every step is idempotent, and a call that finds its run already recorded as
   ended does nothing, so failing anywhere and running again ends in the same state.
"""

from __future__ import annotations

import collections
import json
import logging
import os

import apache_beam as beam

from beam_pipelines import decontamination, mixture, model_filter, quality
from beam_pipelines.accounting import accounting_for, check_accounting, source_counts
from common import fs, manifest, prepared_dir, run_lock, shards

ENDED = ("committed", "refused")


def read_run_record(output_dir: str, run_id: str) -> dict | None:
    path = prepared_dir.run_record_path(output_dir, run_id)
    return fs.read_json(path) if fs.exists(path) else None


def run_ended(output_dir: str):
    """For run_lock: whether a run recorded its end in this output folder."""

    def ended(run_id: str) -> bool:
        # Only a well-formed id names a file: a lock's content never leads outside OUT.
        record = read_run_record(output_dir, run_id) if shards.is_run_id(run_id) else None
        return bool(record and record.get("state") in ENDED)

    return ended


def jsonl_records(path: str, max_lines: int):
    """The first `max_lines` records of a JSONL file, streamed. Lines end at b"\\n" only:
    U+2028, U+0085, \\x0b ... are legal inside a JSON string (`splitlines` broke there)."""
    with fs.open_read(path) as f:
        for number, line in enumerate(f):
            if number >= max_lines:
                return
            if not line.strip():
                continue
            try:
                yield json.loads(line.decode("utf-8"))
            except ValueError:  # a summary line must not turn a refusal into a crash
                yield {"reason": "(unreadable dead-letter line)"}


def top_reasons(dead_letter_files: list, limit: int = 3, max_lines: int = 100_000) -> str:
    """The most frequent dead-letter reasons, e.g. `'no field "text"' x 40`."""
    counts = collections.Counter()
    for path in dead_letter_files:
        for record in jsonl_records(path, max_lines):
            counts[str(record.get("reason", "?"))[:80]] += 1
    return "; ".join(f"{reason!r} x {n}" for reason, n in counts.most_common(limit))


def filtered_examples(sample_files: list, limit: int = 2) -> str:
    """A few documents the quality rules removed, from the removed sample: `rule: "excerpt"`."""
    found = {}  # one per rule
    for path in sample_files:
        for record in jsonl_records(path, 10_000):
            rule = record.get("rule")
            if rule in quality.RULES and rule not in found and len(found) < limit:
                found[rule] = f"{record.get('reason', '?')}: {str(record.get('excerpt'))[:60]!r}"
    return "; ".join(found.values()) or "(no removed sample: --removed_sample_size 0)"


def refusal(
    stats: dict,
    written: list,
    splits: list,
    dead_letter_files: list,
    max_rejected_fraction: float,
    max_filtered_fraction: float = 1.0,
) -> str | None:
    """Why this run's result must not replace the previous output, or None."""
    run = accounting_for(stats, splits[0], splits)["run"]
    read, rejected = run["documents_read"], run["documents_rejected"]
    dead = [path for path in dead_letter_files if prepared_dir.is_dead_letter_file(path)]
    if read and rejected / read > max_rejected_fraction:
        return (
            f"{rejected:,} of {read:,} documents were rejected "
            f"({100 * rejected / read:.1f} % > --max_rejected_fraction "
            f"{max_rejected_fraction:g}); top reasons: {top_reasons(dead)}"
        )
    filtered = run["documents_filtered"]
    if read and filtered / read > max_filtered_fraction:
        rules = collections.Counter(run["filtered_by_rule"]).most_common(3)
        samples = [path for path in dead_letter_files if prepared_dir.is_sample_file(path)]
        return (
            f"{filtered:,} of {read:,} documents were removed by the quality filter "
            f"({100 * filtered / read:.1f} % > --max_filtered_fraction "
            f"{max_filtered_fraction:g}); top rules: "
            f"{', '.join(f'{rule} x {n:,}' for rule, n in rules)}; e.g. "
            f"{filtered_examples(samples)}. If the rules do not fit this corpus, loosen "
            f"their flags or pass --quality_filter none (docs/languages.md)"
        )
    empty = [s for s in splits if not any(w["split"] == s for w in written)]
    if empty:
        return (
            f"split(s) {', '.join(empty)} would hold no sequence ({read:,} documents "
            f"read, {rejected:,} rejected, {run['documents_empty']:,} empty, "
            f"{run['documents_duplicate']:,} duplicate, {run['documents_filtered']:,} "
            f"filtered by the quality rules)"
        )
    return None


def changed_refusal(changed_inputs: list) -> str | None:
    """The refusal of a run whose input changed while it read it: what it read is not one
    corpus. `changed_inputs`: (path, `sources.changed_input` line), one per read of a file
    or of a byte range of it."""
    first = dict(sorted(changed_inputs, reverse=True))  # path -> its first line
    if not first:
        return None
    path = min(first)
    more = f" (and {len(first) - 1} more file(s))" if len(first) > 1 else ""
    return f"input {first[path]}{more}; rerun once the input stays as it is"


class Commit(beam.DoFn):
    """Commits the run (see the module docstring); yields its run record.

    Args:
        output_dir: the prepared folder.
        run_id: this run's id (the lock must still name it).
        splits: the split names the run writes.
        max_length: tokens per row, for the manifests.
        tokenizer_info: the tokenizer's record in the manifests (with its path).
        pipeline_args: the command line, recorded in the manifests.
        max_rejected_fraction: refuse above this share of rejected documents.
        max_filtered_fraction: refuse above this share removed by the quality rules.
    """

    def __init__(
        self,
        output_dir,
        run_id,
        splits,
        max_length,
        tokenizer_info,
        pipeline_args,
        max_rejected_fraction: float = 0.1,
        max_filtered_fraction: float = 1.0,
    ):
        self.output_dir, self.run_id, self.splits = output_dir, run_id, splits
        self.max_length, self.tokenizer_info = max_length, tokenizer_info
        self.pipeline_args, self.max_rejected_fraction = pipeline_args, max_rejected_fraction
        self.max_filtered_fraction = max_filtered_fraction

    def process(
        self,
        written: list,
        stats: dict,
        dead_letter_files: list,
        changed_inputs: list = (),
        mixture_plan: dict | None = None,
        decontamination_record: dict | None = None,
        quality_model_record: dict | None = None,
    ):
        """`mixture_plan`: `mixture.plan` of a run with --sources (None without);
        `decontamination_record`: the evaluation sets' record (`decontamination.load`) with
        --decontaminate (None without); `quality_model_record`: the classifier's
        (`model_filter.FilterByModel`) with --quality_model (None without)."""
        record = read_run_record(self.output_dir, self.run_id)
        if record and record.get("state") in ENDED:  # a retry after the end: nothing to do
            run_lock.release(self.output_dir, self.run_id)  # but what a fault left undone
            yield record
            return
        run_lock.confirm(self.output_dir, self.run_id)  # LockLostError if taken over
        stats = dict(stats)
        # Counts of an input that changed under the run need not add up: not a bug.
        reason = changed_refusal(changed_inputs)
        if not reason:
            check_accounting(stats, written, self.splits)
            reason = refusal(
                stats,
                written,
                self.splits,
                dead_letter_files,
                self.max_rejected_fraction,
                self.max_filtered_fraction,
            )
        if reason:
            record = self._refuse(reason, written, dead_letter_files)
        else:
            records = _records(stats, mixture_plan, decontamination_record, quality_model_record)
            committed = {
                split: self._commit_split(split, written, stats, dead_letter_files, records)
                for split in self.splits
            }
            clean_up(self.output_dir, committed)
            record = {
                "run_id": self.run_id,
                "state": "committed",
                "splits": {s: m.accounting["split"] for s, m in committed.items()},
            }
        fs.write_json(prepared_dir.run_record_path(self.output_dir, self.run_id), record)
        run_lock.release(self.output_dir, self.run_id)
        yield record

    def _refuse(self, reason: str, written: list, dead_letter_files: list) -> dict:
        """Deletes the run's shards; its dead letters stay for the user to read (no manifest
        lists them, so the next committed run deletes them). The run record."""
        logging.warning("prepare run %s refused to commit: %s", self.run_id, reason)
        fs.delete(
            [
                prepared_dir.shard_path(self.output_dir, w["split"], w["name"])
                for w in written
                if shards.is_shard_basename(w["name"], w["split"])
            ]
        )
        return {
            "run_id": self.run_id,
            "state": "refused",
            "reason": reason,
            "dead_letter_files": sorted(dead_letter_files),
        }

    def _commit_split(self, split, written, stats, dead_letter_files, records) -> manifest.Manifest:
        """Writes one split's manifest; `records`: its `mixture` and `decontamination`."""
        mine = sorted((w for w in written if w["split"] == split), key=lambda w: w["shard"])
        entries = [
            manifest.Shard(
                w["name"], w["num_examples"], w["num_tokens"], w["num_bytes"], w["crc32c"]
            )
            for w in mine
        ]
        committed = manifest.Manifest(
            split=split,
            max_length=self.max_length,
            num_examples=sum(s.num_examples for s in entries),
            num_tokens=sum(s.num_tokens for s in entries),
            shards=entries,
            tokenizer=self.tokenizer_info,
            pipeline_args=self.pipeline_args,
            accounting=accounting_for(stats, split, self.splits),
            run_id=self.run_id,
            dead_letter_files=sorted(dead_letter_files),
            **records,
        )
        manifest.write_manifest(prepared_dir.split_dir(self.output_dir, split), committed)
        return committed


def _records(stats: dict, mixture_plan, decontamination_record, quality_model_record) -> dict:
    """The manifests' `mixture`, `decontamination` and `quality_model` ({} for a step the run
    did not run)."""
    return {
        "mixture": mixture.manifest_record(mixture_plan, source_counts(stats))
        if mixture_plan is not None
        else {},
        "decontamination": decontamination.manifest_record(decontamination_record, stats)
        if decontamination_record is not None
        else {},
        "quality_model": model_filter.manifest_record(quality_model_record, stats)
        if quality_model_record is not None
        else {},
    }


def clean_up(output_dir: str, committed: dict) -> None:
    """After the commit: deletes what no committed manifest lists, in our folders only.
    Every path deleted is derived from a bare name checked here, so stays inside OUT."""
    for split, current in committed.items():
        split_dir = prepared_dir.split_dir(output_dir, split)
        listed = {s.name for s in current.shards}
        fs.delete(
            [
                p
                for p in fs.glob_in(split_dir, "*" + shards.SHARD_SUFFIX)
                if fs.basename(p) not in listed and shards.parse_shard_name(p)
            ]
            + fs.glob_in(split_dir, prepared_dir.TEMP_GLOB)
            + [prepared_dir.marker_path(split_dir)]
        )
    for split_dir in prepared_dir.committed_split_dirs(output_dir):
        path, stale = prepared_dir.manifest_path(split_dir), manifest.try_read(split_dir)
        if fs.basename(split_dir) in committed or stale is None:
            continue
        if not is_ours(fs.basename(split_dir), stale):
            logging.warning("%s is not a manifest this pipeline wrote; left alone", path)
            continue
        # A split an earlier run wrote and this one does not: only what it lists.
        fs.delete(stale.shard_paths(split_dir) + [path, prepared_dir.marker_path(split_dir)])
        fs.remove_empty_folder(split_dir)
    keep = {p for m in committed.values() for p in m.dead_letter_files}
    dead_letters = fs.glob_in(
        prepared_dir.dead_letter_dir(output_dir), "*" + prepared_dir.JSONL_SUFFIX
    )
    fs.delete([p for p in dead_letters if p not in keep])
    fs.delete_trees_in(output_dir, prepared_dir.TEMP_GLOB)  # temp folders of earlier versions
    sweep_dead_runs(output_dir)


def sweep_dead_runs(output_dir: str) -> None:
    """Deletes what killed runs left: Beam's `dead_letter/beam-temp-{run id}-*/` folders and
    `_runs/.tmp-*-{run id}.json` (a run record being written). Never a live run's: a run is
    over unless the lock names it and it has recorded no end; a name with no run id is not
    ours to judge and stays."""
    holder, ended = run_lock.owner(output_dir), run_ended(output_dir)

    def over(name: str) -> bool:
        run_id = shards.run_id_in(name)
        return run_id is not None and (run_id != holder or ended(run_id))

    dead_letter = prepared_dir.dead_letter_dir(output_dir)
    for name in _beam_temp_folders(dead_letter):
        if over(name):
            fs.delete_tree(fs.join(dead_letter, name))
    fs.delete(
        [
            path
            for path in fs.glob_in(prepared_dir.runs_dir(output_dir), prepared_dir.TEMP_GLOB)
            if over(fs.basename(path))
        ]
    )


def _beam_temp_folders(dead_letter: str) -> list[str]:
    """The names of Beam's temporary folders in `dead_letter`, empty local ones too (object
    stores have no empty folders)."""
    prefix = prepared_dir.BEAM_TEMP_PREFIX
    names = {
        path[len(dead_letter) + 1 :].split("/", 1)[0]
        for path in fs.glob_in(dead_letter, prefix + "*/**")
    }
    if not fs.is_remote(dead_letter) and os.path.isdir(dead_letter):
        names.update(n for n in os.listdir(dead_letter) if n.startswith(prefix))
    return sorted(names)


def is_ours(folder_name: str, found: manifest.Manifest) -> bool:
    """A manifest this pipeline wrote for the split folder it lies in: a valid split name,
    and every shard a bare name of that split's shards (never a path, never `..`)."""
    return (
        prepared_dir.split_name_problem(folder_name) is None
        and found.split == folder_name
        and all(shards.is_shard_basename(s.name, folder_name) for s in found.shards)
    )
