"""Training and evaluation input: validated shard lists and per-host input pipelines.

A split folder is either what the prepare pipeline writes (its names: common/prepared_dir.py;
the shards its `manifest.json` lists, checked by `common.manifest.read_manifest`) or, for
interop, a folder of the legacy HF example's shards (`*-INDEX-COUNT.tfrecord`, counted from the
file names).

The training stream is an endless, deterministic function of (seed, step): data epoch `e`
shuffles its files and records with seeds derived from (seed, e), so a resumed run can start
the stream at any step and see the batches the uninterrupted run would have seen. The order
is decided once, in `trainer/data/data_order.py`; two pipelines follow it to the same batches:
tf.data for the TensorFlow backend (`data_tf.py`), grain without TensorFlow for JAX
(`data_grain.py`). The backend picks one (`PipelineShare.pipeline`); nothing here imports
TensorFlow.

Example:
    >>> source = resolve_split("gs://b/data/train", tokenizer_info, max_length=128)
    >>> fn = train_dataset_fn(source, per_replica_batch_size=32, seed=42, start_step=0)
    >>> dataset = fn(PipelineShare())   # or through a backend's `distribute` (trainer/backends)

Training batches also carry each batch's `step` and each example's `row` in the global batch
(the masking keys, trainer/pretraining/train_step.py); evaluation batches carry the features only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath

from common import fs, manifest, prepared_dir, schema, shards, tfrecord
from common.errors import UserError
from common.manifest import ManifestError
from trainer.data import data_order
from trainer.data.data_order import ROW, STEP  # noqa: F401  (re-exported: data.STEP, data.ROW)


class DataError(UserError):
    """Data that is well-formed but does not fit the run (too few examples for a batch...)."""


TF_DATA, GRAIN = "tf.data", "grain"  # the two input pipelines (data_tf.py, data_grain.py)


@dataclasses.dataclass(frozen=True)
class PipelineShare:
    """One input pipeline's place: which of how many (one per host), how many batches it
    gives per step (TensorFlow: one per local replica; JAX: one host batch), and which
    pipeline builds them (the backend's: tf.data, or grain without TensorFlow)."""

    pipeline_id: int = 0
    num_pipelines: int = 1
    batches_per_step: int = 1
    pipeline: str = TF_DATA


@dataclasses.dataclass(frozen=True)
class SplitSource:
    """The shards of one split, their record counts and the sequence length.

    `record_shard = (index, count)` makes a pipeline keep every `count`-th record from
    `index` of the common file order: how hosts share a split with fewer files than hosts
    (a small validation split is often one shard), and how evaluation always shares, so
    every host gets the same number of eval batches.
    """

    split_dir: str
    files: tuple
    counts: tuple
    max_length: int
    record_shard: tuple = ()
    digest: str = ""  # identifies the split's content; a resumed run must see the same
    legacy_format: bool = False  # no manifest: the digest is of the file listing
    run_id: str = ""  # the prepare run that committed the split (its manifest says)

    @property
    def num_examples(self) -> int:
        """Examples this pipeline reads in one pass."""
        return data_order.num_records(self.counts, self.record_shard)

    @property
    def min_examples(self) -> int:
        """The smallest `num_examples` over the pipelines sharing the split by records."""
        return sum(self.counts) // self.record_shard[1] if self.record_shard else self.num_examples

    def for_pipeline(
        self, pipeline_id: int, num_pipelines: int, by_records: bool = False
    ) -> SplitSource:
        """What one input pipeline (one TPU host) reads: every `num_pipelines`-th file, or
        every `num_pipelines`-th record when there are too few files (or `by_records`)."""
        if num_pipelines == 1:
            return self
        if by_records or len(self.files) < num_pipelines:
            return dataclasses.replace(self, record_shard=(pipeline_id, num_pipelines))
        return dataclasses.replace(
            self,
            files=self.files[pipeline_id::num_pipelines],
            counts=self.counts[pipeline_id::num_pipelines],
        )


def resolve_split(split_dir: str, tokenizer_info, max_length: int | None = None) -> SplitSource:
    """Validates a split folder against the tokenizer; raises `ManifestError` with one reason."""
    split_dir = split_dir.rstrip("/")
    files = fs.glob_in(split_dir, "*" + shards.SHARD_SUFFIX)
    has_manifest = fs.exists(prepared_dir.manifest_path(split_dir)) or fs.exists(
        prepared_dir.marker_path(split_dir)
    )
    ours = files and all(shards.parse_shard_name(f) for f in files)
    if has_manifest or ours:  # our pipeline's output: only trusted through its manifest
        found = manifest.read_manifest(
            split_dir,
            max_length=max_length,
            tokenizer_fingerprint=tokenizer_info.fingerprint,
            vocab_size=tokenizer_info.vocab_size,
        )
        return SplitSource(
            split_dir,
            tuple(found.shard_paths(split_dir)),
            tuple(s.num_examples for s in found.shards),
            found.max_length,
            digest=_manifest_digest(found),
            run_id=found.run_id,
        )
    if not files:
        raise ManifestError(
            f"{split_dir} holds no {prepared_dir.MANIFEST} and no *{shards.SHARD_SUFFIX} shards; "
            "point it at a split folder written by the prepare pipeline."
        )
    return _legacy_format_split(split_dir, files, tokenizer_info, max_length)


def check_one_prepare_run(*sources: SplitSource) -> None:
    """Refuses splits of one prepared output folder committed by different prepare runs
    (`common.manifest.mixed_runs`: a rerun cut short between its manifest writes). Splits of
    different output folders are the user's choice, and legacy shards record no run."""
    by_output = {}
    for source in sources:
        if not source.legacy_format:
            output = posixpath.dirname(source.split_dir.rstrip("/"))
            by_output.setdefault(output, {})[source.split_dir] = source.run_id
    for run_ids in by_output.values():
        mixed = manifest.mixed_runs(run_ids)
        if mixed:
            raise ManifestError(mixed)


def _legacy_format_split(split_dir, files, tokenizer_info, max_length) -> SplitSource:
    counts = [shards.count_from_name(f) for f in files]
    if None in counts:
        bad = files[counts.index(None)]
        raise ManifestError(
            f"{bad} has no record count in its name (expected *-INDEX-COUNT.tfrecord) and "
            f"{split_dir} has no {prepared_dir.MANIFEST}."
        )
    # No manifest to check against: look at the first record instead (cheap, one read).
    try:
        with fs.open_read(files[0]) as stream:
            first = next(tfrecord.records(stream), None)
        ids = [] if first is None else schema.example_features(first).get(schema.INPUT_IDS, [])
    except (tfrecord.RecordError, schema.RecordSchemaError) as err:
        raise ManifestError(f"the first record of {files[0]} is unreadable ({err}).") from None
    if first is None:
        raise ManifestError(f"{files[0]} holds no records.")
    if max_length is not None and len(ids) != max_length:
        raise ManifestError(
            f"{split_dir} holds sequences of length {len(ids)}, but {max_length} was asked "
            "for. Prepare the data again or pass the matching --max_length."
        )
    if ids and max(ids) >= tokenizer_info.vocab_size:
        raise ManifestError(
            f"{split_dir} holds token id {max(ids)}, outside the tokenizer's vocabulary of "
            f"{tokenizer_info.vocab_size}; it was tokenized with another tokenizer."
        )
    return SplitSource(
        split_dir,
        tuple(files),
        tuple(counts),
        len(ids),
        digest=_listing_digest(files),
        legacy_format=True,
    )


def _manifest_digest(found: manifest.Manifest) -> str:
    return hashlib.sha256(found.to_json().encode()).hexdigest()


def _listing_digest(files) -> str:
    return hashlib.sha256("\n".join(fs.basename(f) for f in files).encode()).hexdigest()


def digest_now(source: SplitSource) -> str | None:
    """What `source.digest` would be if the split were resolved now (None: no manifest)."""
    if source.legacy_format:
        return _listing_digest(fs.glob_in(source.split_dir, "*" + shards.SHARD_SUFFIX))
    found = manifest.try_read(source.split_dir)
    return _manifest_digest(found) if found else None


def start_position(
    source: SplitSource,
    batch_size: int,
    start_step: int,
    local_replicas: int = 1,
    micro_batches: int = 1,
) -> tuple[int, int, int]:
    """(data epoch, batches to skip in it, batches per epoch) of a pipeline at `start_step`
    (`data_order.start_position`): the examples of a step are the same whether one replica
    takes a batch of 16 or two replicas take 8 each, or one replica takes two micro-batches
    of 8, so a resume may change the split of the same global batch."""
    per_step = local_replicas * micro_batches
    if data_order.steps_per_epoch(source.num_examples, batch_size, per_step) < 1:
        raise DataError(
            f"{source.split_dir} has {source.num_examples} examples per input pipeline, fewer "
            f"than one step of {per_step} batch(es) of {batch_size}."
        )
    return data_order.start_position(source.num_examples, batch_size, start_step, per_step)


def _module(pipeline: str):
    """The pipeline's module, imported on demand: a JAX run never imports TensorFlow."""
    if pipeline == GRAIN:
        from trainer.data import data_grain

        return data_grain
    from trainer.data import data_tf

    return data_tf


def train_dataset(
    source: SplitSource,
    batch_size: int,
    seed: int,
    start_step: int = 0,
    shuffle_buffer: int = 2**16,
    share: PipelineShare = PipelineShare(),
    micro_batches: int = 1,
    stream_start: int = 0,
):
    """Endless batches of `{input_ids, attention_mask}` (int32) with their `step` and `row`,
    starting at `start_step` (`micro_batches` batches per replica per step), from the
    pipeline `share` names (a tf.data or a grain dataset). The stream began at step
    `stream_start` (a later one when the run switched to this data then: --phases,
    --extend_context): it is read from position `start_step - stream_start`, while the
    batches carry the run's own step, so the masking keys run on."""
    position = start_position(
        source, batch_size, start_step - stream_start, share.batches_per_step, micro_batches
    )
    return _module(share.pipeline).train_dataset(
        source, batch_size, seed, shuffle_buffer, start_step, position, share, micro_batches
    )


def eval_batch_count(
    source: SplitSource, batch_size: int, max_batches: int | None = None, local_replicas: int = 1
) -> int:
    """Batches of one evaluation pass: a multiple of `local_replicas`, so every replica gets
    a full batch at every step (fixed shapes for XLA)."""
    num_batches = source.min_examples // batch_size // local_replicas * local_replicas
    if max_batches:
        num_batches = min(num_batches, max_batches * local_replicas)
    if num_batches < 1:
        raise DataError(
            f"{source.split_dir} has {source.num_examples} examples per input pipeline, fewer "
            f"than one evaluation batch of {batch_size} per replica."
        )
    return num_batches


def eval_dataset(
    source: SplitSource,
    batch_size: int,
    max_batches: int | None = None,
    local_replicas: int = 1,
    pipeline: str = TF_DATA,
):
    """One pass in file order (no shuffle), so every evaluation sees the same batches."""
    num_batches = eval_batch_count(source, batch_size, max_batches, local_replicas)
    return _module(pipeline).eval_dataset(source, batch_size, num_batches)


def train_dataset_fn(
    source: SplitSource,
    per_replica_batch_size: int,
    seed: int,
    start_step: int = 0,
    shuffle_buffer: int = 2**16,
    micro_batches: int = 1,
    stream_start: int = 0,
):
    """A function of a `PipelineShare`: each host reads only its files (or its share of the
    records when there are fewer files than hosts). The seed is the same on every host, so
    record shares of a common file order stay disjoint. `stream_start`: `train_dataset`'s."""

    def dataset_fn(share: PipelineShare):
        mine = source.for_pipeline(share.pipeline_id, share.num_pipelines)
        return train_dataset(
            mine,
            per_replica_batch_size,
            seed,
            start_step,
            shuffle_buffer,
            share,
            micro_batches,
            stream_start,
        )

    return dataset_fn


def eval_steps(
    source: SplitSource, per_replica_batch_size: int, max_batches: int | None, share: PipelineShare
) -> int:
    """Steps of one evaluation pass, given to Keras: a dataset Keras cannot count (grain's)
    otherwise ends each pass with Keras' "input ran out of data" warning."""
    mine = source.for_pipeline(share.pipeline_id, share.num_pipelines, by_records=True)
    batches = eval_batch_count(mine, per_replica_batch_size, max_batches, share.batches_per_step)
    return batches // share.batches_per_step


def eval_dataset_fn(
    source: SplitSource, per_replica_batch_size: int, max_batches: int | None = None
):
    """Evaluation shares by records: every host then runs the same number of batches."""

    def dataset_fn(share: PipelineShare):
        mine = source.for_pipeline(share.pipeline_id, share.num_pipelines, by_records=True)
        return eval_dataset(
            mine, per_replica_batch_size, max_batches, share.batches_per_step, share.pipeline
        )

    return dataset_fn
