"""`OnDiskExecution`: prepare's keyed steps (exact and near dedup, the shuffle) on a local
runner, through files in `spill_dir` (a folder on the workers' shared disk), so that memory
stays flat at corpus size. Same interface and same output as
`beam_pipelines.execution.GroupingExecution`."""

from __future__ import annotations

from beam_pipelines import options as opts_lib
from beam_pipelines.local import exact_dedup, near_dedup, shuffle


class OnDiskExecution:
    def __init__(self, spill_dir: str):
        self.spill_dir = spill_dir

    def exact_dedup(self, read_again, splits, opts, progress_dir):
        """Two reads of the input, no text held in memory; the second read's dead letters and
        counts are the first's again, so only the first's are kept, and its documents get
        the splits the first read chose (recorded with their places: no text hashed again).
        The second read meets the quality rules again: what they dropped before the dedup is
        no copy."""
        self.exact = exact_dedup.ExactDedupByRereading(
            read_again, self.spill_dir, splits, progress_dir, opts_lib.quality_config(opts))
        return self.exact

    def near_dedup(self, read_again, opts, config):
        """A third read of the input, filtered to the exact dedup's survivors, once the near
        matches are known (local/near_dedup.py); call after `exact_dedup`."""
        exact = self.exact

        def reread(after):
            return exact.survivors(read_again(after, "RereadNear"))

        return near_dedup.NearDedupByRereading(reread, self.spill_dir, config)

    def shuffle(self, block_parts, opts, run_id, progress_dir, shard_size, fixed_shards):
        """Each PCollection of row blocks spilled as it is made (no Flatten: a local runner
        would hold its output in memory)."""
        return block_parts | "ShuffleOnDisk" >> shuffle.ShuffleOnDisk(
            self.spill_dir, opts.output_dir, run_id, opts.seed, opts.max_length, shard_size,
            fixed_shards, progress_dir)
