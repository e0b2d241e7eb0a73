"""The prepare pipeline: documents -> tokens -> fixed-length sequences -> shuffled shards.

    python -m beam_pipelines.prepare --input 'corpus/*.jsonl.gz' --tokenizer TOKENIZER_DIR \\
        --output_dir OUT --max_length 128 --validation_fraction 0.01 [Beam options]

Writes `OUT/{split}/{split}-{index:05d}-{count}.tfrecord`, `OUT/{split}/manifest.json`,
then `OUT/{split}/_COMPLETE`, and `OUT/dead_letter/*.jsonl` (one line per rejected
record: source, line, reason). Runs on Beam's local runner by default and on Dataflow
with `--runner DataflowRunner` (see `make prepare`); workers read the input files (or
dataset shards) in parallel, the launching machine only lists them.
"""

from __future__ import annotations

import sys
import time
import uuid

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beam_pipelines import options as opts_lib
from beam_pipelines import shard_writer, sources, tokenization
from beam_pipelines.tokenization import STATS
from common import fs, manifest, shards, tokenizer_files


def read_tasks(opts) -> list[tuple]:
    """What workers read: one task per file (or per dataset shard), listed on the launcher."""
    if opts.hf_dataset:
        return [("hf", split, index, n)
                for split in opts_lib.split_names(opts)
                for n in [sources.hf_num_shards(opts.hf_dataset, opts.hf_config, split)]
                for index in range(n)]
    patterns = opts_lib.parse_splits(opts.splits) if opts.splits else {None: opts.input}
    return [("file", path, split, start, end)
            for split, pattern in patterns.items()
            for path, size in sources.expand_inputs(pattern).items()
            for start, end in sources.byte_ranges(path, size, opts.txt_unit,
                                                  opts.read_range_bytes)]


def build(p: beam.Pipeline, opts, tokenizer_info, run_id: str, pipeline_args: dict):
    """Adds the whole pipeline to `p`; returns the PCollection of Finalize's summary."""
    splits = opts_lib.split_names(opts)
    temp_dir = fs.join(opts.output_dir, f".tmp-{run_id}")
    read = (p
            | "ListInputs" >> beam.Create(read_tasks(opts))
            | "SpreadInputs" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(tokenization.ReadDocuments(
                opts.text_field, opts.max_document_bytes, opts.txt_unit, opts.hf_dataset,
                opts.hf_config)).with_outputs("dead", STATS, main="docs"))
    blocks, sequence_stats = read.docs | "ToSequences" >> tokenization.ToSequences(
        opts.tokenizer, opts.max_length, opts.pad_tail, tokenizer_info.pad_id,
        opts.validation_fraction, opts.test_fraction, opts.tokenize_batch_chars)
    counts = (blocks
              | "RowsPerBlock" >> beam.Map(lambda block: (block[0], len(block[1])))
              | "RowsPerSplit" >> beam.CombinePerKey(sum))
    written = (blocks
               | "AssignShards" >> beam.ParDo(
                   shard_writer.AssignShards(opts.seed, opts.max_length,
                                             opts_lib.shard_size(opts), opts.num_shards),
                   counts=beam.pvalue.AsDict(counts))
               | "GroupShards" >> beam.GroupByKey()
               | "WriteShards" >> beam.ParDo(shard_writer.WriteShard(temp_dir)))
    stats = ((read[STATS], sequence_stats)
             | "AllStats" >> beam.Flatten()
             | "SumStats" >> beam.CombinePerKey(sum))
    dead_files = (read.dead
                  | "DeadLetterJson" >> beam.Map(sources.DeadLetter.to_json)
                  | "WriteDeadLetters" >> beam.io.WriteToText(
                      fs.join(temp_dir, "dead_letter", "dead_letter"),
                      file_name_suffix=".jsonl", num_shards=1))
    return (written
            | "CollectShards" >> beam.combiners.ToList()
            | "Finalize" >> beam.ParDo(
                shard_writer.Finalize(opts.output_dir, temp_dir, splits, opts.max_length,
                                      tokenizer_info.to_dict() | {"path": opts.tokenizer},
                                      pipeline_args),
                stats=beam.pvalue.AsDict(stats),
                dead_letter_files=beam.pvalue.AsList(dead_files)))


def pipeline_options(argv) -> PipelineOptions:
    options = PipelineOptions(argv)
    standard = options.view_as(StandardOptions)
    if not standard.runner:
        # The default DirectRunner first tries to download the Prism binary (FACTS.md).
        standard.runner = "FnApiRunner"
    return options


def summarize(output_dir: str, splits: list[str]) -> str:
    lines = []
    for split in splits:
        m = manifest.read_manifest(shards.split_dir(output_dir, split))
        acc = m.accounting["split"]
        lines.append(
            f"{split:>10}: {m.num_examples:,} sequences of {m.max_length} in {len(m.shards)} "
            f"shard(s); {acc['documents_tokenized']:,} documents, {acc['documents_empty']:,} "
            f"empty; tokens in {acc['tokens_in']:,}, written {acc['tokens_written']:,}, "
            f"dropped {acc['tokens_dropped']:,} ({100 * acc['dropped_fraction']:.4f} %), "
            f"padding {acc['tokens_padded']:,}")
        run = m.accounting["run"]
    lines.append(f"documents read {run['documents_read']:,} = tokenized "
                 f"{run['documents_tokenized']:,} + empty {run['documents_empty']:,} + "
                 f"rejected {run['documents_rejected']:,} (see {output_dir}/dead_letter/)")
    return "\n".join(lines)


def run(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    options = pipeline_options(argv)
    opts = options.view_as(opts_lib.PrepareOptions)
    try:
        opts_lib.check(opts)
        _, tokenizer_info = tokenizer_files.load(opts.tokenizer)  # fail early, on the launcher
        splits = opts_lib.split_names(opts)
        dry_run = bool(options.get_all_options().get("dry_run"))
        if not dry_run:  # from here on no old split in OUT reads as complete
            fs.delete(fs.glob(fs.join(opts.output_dir, "*", manifest.MARKER_NAME)))
        run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:8]
        args = {k: v for k, v in options.get_all_options(drop_default=True).items()
                if "credential" not in k and "token" not in k}
        start = time.monotonic()
        with beam.Pipeline(options=options) as p:
            build(p, opts, tokenizer_info, run_id, args)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if dry_run:
        print("dry run: the Dataflow job graph was built and validated; nothing ran")
        return 0
    print(f"prepared {opts.output_dir} in {time.monotonic() - start:.1f} s")
    print(summarize(opts.output_dir, splits))
    return 0


if __name__ == "__main__":
    sys.exit(run())
