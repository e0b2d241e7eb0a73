"""How the graph's keyed steps run: exact and near dedup, and the shuffle of rows into shards.

`prepare.build` builds one execution per run and asks it for both dedups, then for the
shuffle: `GroupingExecution` (here) uses Beam's GroupByKey, which Dataflow runs on its shuffle
service; `local.execution.OnDiskExecution` runs the same steps through sorted files on disk,
because Beam's local runners keep a GroupByKey's values in memory. Both write the same shards.
Each is built from the run's resolved `options.Settings`; the seam is

    dedups() -> (exact dedup, near dedup)  # transforms `cleaning.Clean` applies; None: off
    shuffle(blocks) -> (written shard records, shuffle stats)
"""

from __future__ import annotations

import apache_beam as beam

from beam_pipelines import dedup, near_dedup, shard_writer
from beam_pipelines.accounting import STATS
from beam_pipelines.options import Settings


class GroupingExecution:
    """Any runner, Dataflow in practice: keys grouped by Beam, the input read once.

    Args:
        settings: the run's resolved flags.
        run_id: the run's id, in the shards' names.
        progress_dir: where running totals go for the progress lines (local runs); None: none.
    """

    def __init__(self, settings: Settings, run_id: str, progress_dir: str | None = None):
        self.settings, self.run_id, self.progress_dir = settings, run_id, progress_dir

    def dedups(self) -> tuple[beam.PTransform | None, beam.PTransform | None]:
        """(`dedup.ExactDedup`: a CombinePerKey on the text's key, `near_dedup.NearDedup`:
        GroupByKeys on band keys and on places); None where the step is off."""
        settings = self.settings
        exact = dedup.ExactDedup(settings.flags.removed_sample_size) if settings.exact else None
        near = near_dedup.NearDedup(settings.near) if settings.near else None
        return exact, near

    def shuffle(self, blocks):
        """PCollections of row blocks (`tokenization.ToSequences`'s) -> (written shard
        records, shuffle stats), rows grouped by shard."""
        flags = self.settings.flags
        blocks = blocks | "AllBlocks" >> beam.Flatten()
        counts = (
            blocks
            | "RowsPerBlock" >> beam.Map(lambda block: (block[0], len(block[1])))
            | "RowsPerSplit" >> beam.CombinePerKey(sum)
        )
        assigned = blocks | "AssignShards" >> beam.ParDo(
            shard_writer.AssignShards(
                flags.seed, flags.max_length, self.settings.shard_size, self.settings.fixed_shards
            ),
            counts=beam.pvalue.AsDict(counts),
        ).with_outputs(STATS, main="rows")
        written = (
            assigned.rows
            | "GroupShards" >> beam.GroupByKey()
            | "WriteShards"
            >> beam.ParDo(shard_writer.WriteShard(flags.output_dir, self.run_id, self.progress_dir))
        )
        return written, assigned[STATS]
