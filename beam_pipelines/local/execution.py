"""`OnDiskExecution`: prepare's keyed steps (exact and near dedup, the shuffle) on a local
runner, through files in `spill_dir` (a folder on the workers' shared disk), so that memory
stays flat at corpus size. Same seam and same output as
`beam_pipelines.execution.GroupingExecution`."""

from __future__ import annotations

import apache_beam as beam

from beam_pipelines.local import exact_dedup, near_dedup, shuffle
from beam_pipelines.options import Settings


class OnDiskExecution:
    """Keyed steps through sorted files; the dedups read the input again (`reader`).

    Args:
        settings: the run's resolved flags.
        run_id: the run's id, in the shards' names.
        reader: prepare's reader of the input: `again(after, label)` reads it once more,
            starting only when the PCollection `after` is complete.
        spill_dir: the folder for the sorted files, removed with the run by its owner.
        progress_dir: where running totals go for the progress lines; None: none.
    """

    def __init__(
        self,
        settings: Settings,
        run_id: str,
        reader,
        spill_dir: str,
        progress_dir: str | None = None,
    ):
        self.settings, self.run_id, self.reader = settings, run_id, reader
        self.spill_dir, self.progress_dir = spill_dir, progress_dir

    def dedups(self) -> tuple[beam.PTransform | None, beam.PTransform | None]:
        """(exact, near), None where off. Exact: two reads of the input, no text held in
        memory; the second read's dead letters and counts are the first's again, so only the
        first's are kept, and its documents get the splits the first read chose (recorded
        with their places: no text hashed again). The second read meets the quality rules
        again: what they dropped before the dedup is no copy. Near: a third read, filtered
        to the exact dedup's survivors, once the near matches are known (local/near_dedup.py)."""
        if not self.settings.exact:
            return None, None
        exact = exact_dedup.ExactDedupByRereading(
            self.reader.again,
            self.spill_dir,
            self.settings.splits,
            self.progress_dir,
            self.settings.quality,
        )
        if self.settings.near is None:
            return exact, None

        def reread(after):
            return exact.survivors(self.reader.again(after, "RereadNear"))

        return exact, near_dedup.NearDedupByRereading(reread, self.spill_dir, self.settings.near)

    def shuffle(self, blocks):
        """Each PCollection of row blocks spilled as it is made (no Flatten: a local runner
        would hold its output in memory)."""
        flags = self.settings.flags
        return blocks | "ShuffleOnDisk" >> shuffle.ShuffleOnDisk(
            self.spill_dir,
            flags.output_dir,
            self.run_id,
            flags.seed,
            flags.max_length,
            self.settings.shard_size,
            self.settings.fixed_shards,
            self.progress_dir,
        )
