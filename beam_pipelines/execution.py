"""How the graph's keyed steps run: exact and near dedup, and the shuffle of rows into shards.

`prepare.build` asks one execution object for all three, chosen once by the launcher:
`GroupingExecution` (here) uses Beam's GroupByKey, which Dataflow runs on its shuffle service;
`local.execution.OnDiskExecution` runs the same steps through sorted files on disk, because
Beam's local runners keep a GroupByKey's values in memory. Both write the same shards.
"""

from __future__ import annotations

import apache_beam as beam

from beam_pipelines import dedup, near_dedup, shard_writer
from beam_pipelines.accounting import STATS


class GroupingExecution:
    """Any runner, Dataflow in practice: keys grouped by Beam."""

    def exact_dedup(self, read_again, splits, opts, progress_dir):
        """`dedup.ExactDedup`: Beam's CombinePerKey on the text's key (the input is read once)."""
        del read_again, splits, progress_dir
        return dedup.ExactDedup(opts.removed_sample_size)

    def near_dedup(self, read_again, opts, config):
        """`near_dedup.NearDedup`: GroupByKeys on band keys and on places."""
        del read_again, opts
        return near_dedup.NearDedup(config)

    def shuffle(self, block_parts, opts, run_id, progress_dir, shard_size, fixed_shards):
        """PCollections of row blocks (`tokenization.ToSequences`'s) -> (written shard
        records, shuffle stats), rows grouped by shard."""
        blocks = block_parts | "AllBlocks" >> beam.Flatten()
        counts = (blocks
                  | "RowsPerBlock" >> beam.Map(lambda block: (block[0], len(block[1])))
                  | "RowsPerSplit" >> beam.CombinePerKey(sum))
        assigned = blocks | "AssignShards" >> beam.ParDo(
            shard_writer.AssignShards(opts.seed, opts.max_length, shard_size, fixed_shards),
            counts=beam.pvalue.AsDict(counts)).with_outputs(STATS, main="rows")
        written = (assigned.rows
                   | "GroupShards" >> beam.GroupByKey()
                   | "WriteShards" >> beam.ParDo(
                       shard_writer.WriteShard(opts.output_dir, run_id, progress_dir)))
        return written, assigned[STATS]
