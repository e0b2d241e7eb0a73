"""The prepare pipeline: documents -> tokens -> fixed-length sequences -> shuffled shards.

    python -m beam_pipelines.prepare --input 'corpus/*.jsonl.gz' --tokenizer TOKENIZER_DIR \\
        --output_dir OUT --max_length 128 --validation_fraction 0.01 [Beam options]

Writes `OUT/{split}/{split}-{run_id}-{index:05d}-{count}.tfrecord`, then commits each
split by writing `OUT/{split}/manifest.json` (see beam_pipelines/commit.py: the previous
output stays valid until then, and a failed or refused run leaves it untouched), and
`OUT/dead_letter/{run_id}-*.jsonl` (one line per rejected record: source, line, reason);
every name in OUT: common/prepared_dir.py. Named, weighted inputs: `--sources` (mixture.py);
documents sharing n-grams with evaluation sets removed: `--decontaminate` (decontamination.py).
Every flag is checked, and the output's lock taken, before anything runs.
Runs on Beam's local runner by default and on Dataflow
with `--runner DataflowRunner` (see `make prepare`); workers read the input files (or
dataset shards) in parallel, the launching machine only lists them.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    PipelineOptions,
    StandardOptions,
)

from beam_pipelines import (
    cleaning,
    commit,
    decontamination,
    hf_datasets,
    input_spec,
    jsonl_files,
    mixture,
    model_filter,
    progress,
    provenance,
    quality_models,
    sources,
    summary,
    tokenization,
)
from beam_pipelines import options as opts_lib
from beam_pipelines.accounting import STATS
from beam_pipelines.execution import GroupingExecution
from beam_pipelines.local import memory_check
from beam_pipelines.local.execution import OnDiskExecution
from common import fs, prepared_dir, run_lock, shards, tokenizer_files
from common.errors import UserError, no_room_logged_once, run_cli


def read_tasks(settings: opts_lib.Settings) -> list[tuple]:
    """What workers read: one task per file (or per dataset shard), listed on the launcher."""
    source = settings.flags.source
    if source.hf_dataset:
        return [
            ("hf", split, index, n)
            for split in settings.splits
            for n in [hf_datasets.hf_num_shards(source.hf_dataset, source.hf_config, split)]
            for index in range(n)
        ]
    files = {
        split: input_spec.expand_inputs(pattern, f"--splits ({split})" if split else "--input")
        for split, pattern in settings.inputs
    }
    if settings.mixture is not None:  # listed by `mixture.with_files`
        files = {None: {path: fs.Stamp(*stamp) for path, _, stamp in settings.mixture.files}}
    opts_lib.check_inputs(settings.flags.output_dir, {s: list(f) for s, f in files.items()})
    # Each task carries its file's listed stamp: a reader that finds another file (rewritten
    # since, or between the two reads of a local exact dedup) has the run refused.
    return [
        ("file", path, split, start, end, tuple(stamp))
        for split, found in files.items()
        for path, stamp in found.items()
        for start, end in input_spec.byte_ranges(
            path, stamp.size, source.txt_unit, settings.flags.read_range_bytes
        )
    ]


class Reader:
    """The input's documents, read as often as the run needs: `first()` once, and `again`
    for an execution that dedups by reading the input again (local runs). Every read's
    record of inputs that are no longer the files listed goes to the commit (`changed`).

    Args:
        p: the pipeline.
        tasks: `read_tasks`' list.
        source: what the documents are read from (`PrepareFlags.source`).
    """

    def __init__(self, p: beam.Pipeline, tasks: list, source: input_spec.InputSpec):
        self.source, self._changed, self._closed = source, [], False
        self._spread = p | "ListInputs" >> beam.Create(tasks) | "SpreadInputs" >> beam.Reshuffle()

    def _read(self, label: str, todo):
        if self._closed:  # its changed inputs would escape the commit's check
            raise RuntimeError(f"read {label!r} added after Reader.changed()")
        source = self.source
        read = todo | label >> beam.ParDo(
            sources.ReadDocuments(
                source.text_field,
                source.max_document_bytes,
                source.txt_unit,
                source.hf_dataset,
                source.hf_config,
            )
        ).with_outputs("dead", STATS, sources.CHANGED, main="docs")
        self._changed.append(read[sources.CHANGED])
        return read

    def first(self):
        """The documents (main), dead letters ("dead") and counts (STATS) of the first read."""
        return self._read("Read", self._spread)

    def again(self, after, label: str = "Reread"):
        """The documents once more, from a read that starts only once the PCollection
        `after` is complete (a side input: not one task is read before)."""
        todo = self._spread | f"{label}Wait" >> beam.Map(
            lambda task, _: task, beam.pvalue.AsList(after)
        )
        return self._read(label, todo).docs

    def changed(self):
        """Every read's changed inputs; the graph's last read must come before."""
        self._closed = True
        return tuple(self._changed) | "ChangedInputs" >> beam.Flatten()


def _side_files(dead, removed, flags, run_id: str):
    """Writes the dead letters (a shard per writer) and the removed sample; their paths.
    The sample goes with the dead letters: committed manifests list both, so both stay."""
    dead_files = (
        dead
        | "DeadLetterJson" >> beam.Map(sources.DeadLetter.to_json)
        | "WriteDeadLetters"
        >> jsonl_files.WriteJsonl(prepared_dir.dead_letter_prefix(flags.output_dir, run_id))
    )
    sample_files = removed | "SampleRemoved" >> cleaning.WriteRemovedSample(
        prepared_dir.sample_prefix(flags.output_dir, run_id), flags.removed_sample_size
    )
    return (dead_files, sample_files) | "SideFiles" >> beam.Flatten()


def _after_cleaning(docs, settings: opts_lib.Settings, run_id: str) -> tuple:
    """The optional steps between the cleaning and the tokenizer -> (docs, their `Removed`
    PCollections, their STATS PCollections, the paths of their files, the commit's side
    inputs)."""
    removed, stats, files, side = [], [], [], {}
    if settings.decontamination is not None:  # clean documents, before the mixture weighs them
        docs, found, checked, record = docs | "Decontaminate" >> decontamination.Decontaminate(
            settings.decontamination
        )
        removed, stats = [found], [checked]
        side["decontamination_record"] = beam.pvalue.AsSingleton(record)
    if (
        settings.quality_model is not None
    ):  # the costly step last: what others removed is not scored
        prefix = prepared_dir.low_quality_prefix(settings.flags.output_dir, run_id)
        docs, low, scored, record = docs | "QualityModel" >> model_filter.FilterByModel(
            settings.quality_model, prefix
        )
        files, stats = [low], [*stats, scored]
        side["quality_model_record"] = beam.pvalue.AsSingleton(record)
    if settings.mixture is not None:  # after dedup: shares of clean text, copies kept
        docs, mixed, plan = docs | "Mix" >> mixture.Mix(settings.mixture, settings.flags.seed)
        stats.append(mixed)
        side["mixture_plan"] = beam.pvalue.AsSingleton(plan)
    return docs, removed, stats, files, side


def build(
    p: beam.Pipeline,
    settings: opts_lib.Settings,
    tokenizer_info,
    run_id: str,
    pipeline_args: dict,
    tasks: list,
    progress_dir: str | None = None,
    spill_dir: str | None = None,
):
    """Adds the whole pipeline to `p`; returns the PCollection of the commit's run record.
    DoFns write running totals to `progress_dir` (local runs) for the progress lines.
    The dedups and the shuffle run through sorted files in `spill_dir` on a local runner
    (beam_pipelines/local/), else through Beam's groupings (beam_pipelines/execution.py)."""
    flags = settings.flags
    reader = Reader(p, tasks, flags.source)
    execution = (
        OnDiskExecution(settings, run_id, reader, spill_dir, progress_dir)
        if spill_dir
        else GroupingExecution(settings, run_id, progress_dir)
    )
    read = reader.first()
    docs, removed, removal_stats = read.docs | "Clean" >> cleaning.Clean(
        settings.quality, flags.validation_fraction, flags.test_fraction, *execution.dedups()
    )
    docs, found, more_stats, more_files, plans = _after_cleaning(docs, settings, run_id)
    removed, stats = (*removed, *found), [read[STATS], removal_stats, *more_stats]
    blocks, sequence_stats = docs | "ToSequences" >> tokenization.ToSequences(
        flags.tokenizer,
        flags.max_length,
        flags.pad_tail,
        tokenizer_info.pad_id,
        flags.tokenize_batch_chars,
        progress_dir,
    )
    written, shuffle_stats = execution.shuffle(blocks)
    stats = (
        (*stats, sequence_stats, shuffle_stats)
        | "AllStats" >> beam.Flatten()
        | "SumStats" >> beam.CombinePerKey(sum)
    )
    side_files = (_side_files(read.dead, removed, flags, run_id), *more_files) | (
        "AllSideFiles" >> beam.Flatten()
    )
    return (
        written
        | "CollectShards" >> beam.combiners.ToList()
        | "Commit"
        >> beam.ParDo(
            _commit(settings, tokenizer_info, run_id, pipeline_args),
            stats=beam.pvalue.AsDict(stats),
            dead_letter_files=beam.pvalue.AsList(side_files),
            changed_inputs=beam.pvalue.AsList(reader.changed()),
            **plans,
        )
    )


def _commit(settings: opts_lib.Settings, tokenizer_info, run_id: str, args: dict):
    """The run's commit step (beam_pipelines/commit.py)."""
    flags = settings.flags
    return commit.Commit(
        flags.output_dir,
        run_id,
        list(settings.splits),
        flags.max_length,
        tokenizer_info.to_dict() | {"path": flags.tokenizer},
        args,
        flags.max_rejected_fraction,
        flags.max_filtered_fraction,
    )


def pipeline_options(argv) -> PipelineOptions:
    options = PipelineOptions(argv)
    standard = options.view_as(StandardOptions)
    if not standard.runner:
        # Beam's default DirectRunner first tries to download its Prism runner binary on
        # every batch pipeline; the in-process FnApiRunner never does.
        standard.runner = "FnApiRunner"
    return options


def _prepare(options: PipelineOptions) -> tuple:
    """Everything that can fail on bad input, before anything is written: the settings,
    the tokenizer's record, the read tasks and the arguments to record."""
    settings = mixture.listed(opts_lib.resolve(options.view_as(opts_lib.PrepareOptions)))
    settings = decontamination.loaded(settings)  # the evaluation sets read and indexed
    settings = quality_models.loaded(settings)  # the classifier read and fingerprinted
    tokenizer, tokenizer_info = tokenizer_files.load(settings.flags.tokenizer)  # on the launcher
    opts_lib.check_tokenizer(tokenizer, settings.flags.max_length)
    return settings, tokenizer_info, read_tasks(settings), provenance.recorded_args(options)


def _launch(options: PipelineOptions, settings, tokenizer_info, tasks, args) -> dict:
    """Takes the output's lock, runs the pipeline, returns the run record."""
    flags, run_id = settings.flags, shards.new_run_id()
    runner = str(options.view_as(StandardOptions).runner)
    held = run_lock.acquire(
        flags.output_dir,
        run_id,
        runner,
        takeover=flags.takeover_lock,
        stale=run_lock.StaleRule(
            flags.lock_timeout_hours, ended=commit.run_ended(flags.output_dir)
        ),
    )
    try:
        if "Dataflow" in runner:
            with held.heartbeat():
                _run_on_dataflow(options, settings, tokenizer_info, run_id, args, tasks, held)
        else:
            notice = memory_check.warning(
                tasks, flags.max_length, tokenizer_info.vocab_size, near=settings.near is not None
            )
            if notice:
                print(notice, file=sys.stderr, flush=True)
            with (
                held.heartbeat(),
                tempfile.TemporaryDirectory(prefix="prepare-progress-") as folder,
                tempfile.TemporaryDirectory(prefix="prepare-shuffle-") as spill_dir,
                progress.Reporter(folder, flags.progress_seconds),
                beam.Pipeline(options=options) as p,
            ):
                build(
                    p,
                    settings,
                    tokenizer_info,
                    run_id,
                    args,
                    tasks,
                    progress_dir=folder,
                    spill_dir=spill_dir,
                )
    except BaseException:
        if "Dataflow" not in runner:  # a local run is dead; a Dataflow job may go on
            run_lock.release(flags.output_dir, run_id)
            _sweep_quietly(flags.output_dir)
        raise
    record = commit.read_run_record(flags.output_dir, run_id)
    if record is None:
        raise RuntimeError(f"prepare run {run_id} ended without a run record")
    return record


def _sweep_quietly(output_dir: str) -> None:
    """Once a failed or stopped local run released the lock: what it left in OUT (Beam's
    temporary folders). Best effort: an error here must not hide why the run stopped, and
    the next committed run sweeps whatever stays."""
    try:
        commit.sweep_dead_runs(output_dir)
    except Exception as err:  # noqa: BLE001
        logging.warning("could not remove the temporary files of the stopped run: %s", err)


def _run_on_dataflow(options, settings, tokenizer_info, run_id, args, tasks, held) -> None:
    """Submits the job, records it in the lock (which then lives while the job runs), prints
    its console URL (progress is in the console's Beam metrics), and waits for it."""
    p = beam.Pipeline(options=options)
    build(p, settings, tokenizer_info, run_id, args, tasks)
    result = p.run()
    cloud = options.view_as(GoogleCloudOptions)
    held.note_job(result.job_id(), cloud.project, cloud.region)
    print(
        f"Dataflow job {result.job_id()}: https://console.cloud.google.com/dataflow/jobs/"
        f"{cloud.region}/{result.job_id()}?project={cloud.project}",
        flush=True,
    )
    try:
        result.wait_until_finish()
    finally:  # a failed or cancelled job never reaches its commit, which releases the lock
        if run_lock.job_state_name(result.state) in run_lock.FINAL_JOB_STATES:
            run_lock.release(settings.flags.output_dir, run_id)


def run(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(argv):
        print(opts_lib.help_text())
        return 0
    status = run_cli(lambda: opts_lib.check_known(argv))
    if status:
        return status
    options = pipeline_options(argv)

    def body():
        settings, tokenizer_info, tasks, args = _prepare(options)
        output_dir = settings.flags.output_dir
        if options.get_all_options().get("dry_run"):  # builds the Dataflow graph only
            with beam.Pipeline(options=options) as p:
                build(p, settings, tokenizer_info, shards.new_run_id(), args, tasks)
            print("dry run: the Dataflow job graph was built and validated; nothing ran")
            return 0
        start = time.monotonic()
        with no_room_logged_once(*BEAM_ERROR_LOGGERS):
            record = _launch(options, settings, tokenizer_info, tasks, args)
        if record["state"] != "committed":
            dead = ", ".join(record.get("dead_letter_files", [])) or "none"
            raise RefusedError(
                f"nothing committed, {output_dir} is unchanged: "
                f"{record['reason']} (dead letters: {dead})"
            )
        print(f"prepared {output_dir} in {time.monotonic() - start:.1f} s (run {record['run_id']})")
        print(summary.summarize(output_dir, settings.splits))

    return run_cli(body, argv)


# Where Beam's local runners log a worker's error, traceback included, before raising it.
BEAM_ERROR_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.worker.bundle_processor")


class RefusedError(UserError):
    """The run finished but its result was not committed (see `commit.refusal`)."""


if __name__ == "__main__":
    sys.exit(run())
