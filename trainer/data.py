"""Training and evaluation input: validated shard lists and per-host `tf.data` pipelines.

A split folder is either what the prepare pipeline writes (its names: common/prepared_dir.py;
the shards its `manifest.json` lists, checked by `common.manifest.read_manifest`) or, for
interop, a folder of the legacy HF example's shards (`*-INDEX-COUNT.tfrecord`, counted from the
file names).

The training stream is an endless, deterministic function of (seed, step): data epoch `e`
shuffles its files and records with seeds derived from (seed, e), so a resumed run can start
the stream at any step and see the batches the uninterrupted run would have seen.

Example:
    >>> source = resolve_split("gs://b/data/train", tokenizer_info, max_length=128)
    >>> fn = train_dataset_fn(source, per_replica_batch_size=32, seed=42, start_step=0)
    >>> dataset = fn(PipelineShare())   # or through a backend's `distribute` (trainer/backends)

Training batches also carry each batch's `step` and each example's `row` in the global batch
(the masking keys, trainer/train_step.py); evaluation batches carry the features only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import posixpath

import tensorflow as tf

from common import fs, manifest, prepared_dir, schema, shards
from common.errors import UserError
from common.manifest import ManifestError

class DataError(UserError):
    """Data that is well-formed but does not fit the run (too few examples for a batch...)."""


class SplitReplacedError(DataError):
    """A split folder changed under a running trainer (a prepare rerun into the same folder
    commits new shards and deletes the ones this run was reading)."""


STEP, ROW = "step", "row"  # what a training batch carries besides schema.FEATURES


@dataclasses.dataclass(frozen=True)
class PipelineShare:
    """One input pipeline's place: which of how many (one per host), and how many batches it
    gives per step (TensorFlow: one per local replica; JAX: one host batch)."""

    pipeline_id: int = 0
    num_pipelines: int = 1
    batches_per_step: int = 1


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
        total = sum(self.counts)
        if not self.record_shard:
            return total
        index, count = self.record_shard
        return (total - index + count - 1) // count

    @property
    def min_examples(self) -> int:
        """The smallest `num_examples` over the pipelines sharing the split by records."""
        return sum(self.counts) // self.record_shard[1] if self.record_shard else \
            self.num_examples

    def for_pipeline(self, pipeline_id: int, num_pipelines: int,
                     by_records: bool = False) -> "SplitSource":
        """What one input pipeline (one TPU host) reads: every `num_pipelines`-th file, or
        every `num_pipelines`-th record when there are too few files (or `by_records`)."""
        if num_pipelines == 1:
            return self
        if by_records or len(self.files) < num_pipelines:
            return dataclasses.replace(self, record_shard=(pipeline_id, num_pipelines))
        return dataclasses.replace(self, files=self.files[pipeline_id::num_pipelines],
                                   counts=self.counts[pipeline_id::num_pipelines])


def resolve_split(split_dir: str, tokenizer_info, max_length: int | None = None) -> SplitSource:
    """Validates a split folder against the tokenizer; raises `ManifestError` with one reason."""
    split_dir = split_dir.rstrip("/")
    files = fs.glob_in(split_dir, "*" + shards.SHARD_SUFFIX)
    has_manifest = fs.exists(prepared_dir.manifest_path(split_dir)) or fs.exists(
        prepared_dir.marker_path(split_dir))
    ours = files and all(shards.parse_shard_name(f) for f in files)
    if has_manifest or ours:  # our pipeline's output: only trusted through its manifest
        found = manifest.read_manifest(
            split_dir, max_length=max_length, tokenizer_fingerprint=tokenizer_info.fingerprint,
            vocab_size=tokenizer_info.vocab_size)
        return SplitSource(split_dir, tuple(found.shard_paths(split_dir)),
                           tuple(s.num_examples for s in found.shards), found.max_length,
                           digest=_manifest_digest(found), run_id=found.run_id)
    if not files:
        raise ManifestError(
            f"{split_dir} holds no {prepared_dir.MANIFEST} and no *{shards.SHARD_SUFFIX} shards; "
            "point it at a split folder written by the prepare pipeline.")
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
            f"{split_dir} has no {prepared_dir.MANIFEST}.")
    # No manifest to check against: look at the first record instead (cheap, one read).
    first = next(iter(tf.data.TFRecordDataset(files[0]).take(1)), None)
    if first is None:
        raise ManifestError(f"{files[0]} holds no records.")
    example = tf.train.Example.FromString(first.numpy())
    ids = list(example.features.feature[schema.INPUT_IDS].int64_list.value)
    if max_length is not None and len(ids) != max_length:
        raise ManifestError(
            f"{split_dir} holds sequences of length {len(ids)}, but {max_length} was asked "
            "for. Prepare the data again or pass the matching --max_length.")
    if ids and max(ids) >= tokenizer_info.vocab_size:
        raise ManifestError(
            f"{split_dir} holds token id {max(ids)}, outside the tokenizer's vocabulary of "
            f"{tokenizer_info.vocab_size}; it was tokenized with another tokenizer.")
    return SplitSource(split_dir, tuple(files), tuple(counts), len(ids),
                       digest=_listing_digest(files), legacy_format=True)


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


class UnparsableRecordError(DataError):
    """A record that is not the schema's fixed-length Example (data that lies)."""


@contextlib.contextmanager
def replaced_splits_named(*sources: SplitSource):
    """Turns a read error caused by a split that changed since the run resolved it (a
    prepare rerun into the folder deleted the shards being read) into one
    `SplitReplacedError`, and a record that does not parse (shorter than the manifest's
    length, say) into one `UnparsableRecordError`; every other error passes unchanged."""
    try:
        yield
    except tf.errors.OpError as err:
        for source in sources:
            if digest_now(source) != source.digest:
                raise SplitReplacedError(
                    f"{source.split_dir} changed while this run was reading it (a prepare run "
                    "committed other shards there and deleted the ones being read). Prepare "
                    "new data into a new folder; to go on, restore the old data there (a "
                    "restart with other data is refused).") from err
        if isinstance(err, tf.errors.InvalidArgumentError) and "Example" in err.message:
            first = err.message.strip().splitlines()[0]
            raise UnparsableRecordError(
                f"a record of {' or '.join(s.split_dir for s in sources)} is not an Example of "
                f"{sources[0].max_length} input_ids and attention_mask ({first}); "
                "python -m common.verify names the shard.") from None
        raise


def _parse(serialized, max_length: int) -> dict:
    """One vectorised parse per batch; int32 halves what goes to the accelerator."""
    parsed = schema.parse_batch(serialized, max_length)
    return {name: tf.cast(parsed[name], tf.int32) for name in schema.FEATURES}


def _records(files, source: SplitSource, cycle_length: int = 8) -> tf.data.Dataset:
    """Parallel, deterministic reads from several files at once (this pipeline's share)."""
    records = files.interleave(
        lambda f: tf.data.TFRecordDataset(f, buffer_size=8 << 20),
        cycle_length=cycle_length, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if source.record_shard:  # the file order is the same on every host: shares are disjoint
        index, count = source.record_shard
        records = records.shard(count, index)
    return records


def _one_epoch(source: SplitSource, epoch, batch_size: int, seed: int, shuffle_buffer: int,
               batches: int):
    epoch_seed = tf.cast(epoch, tf.int64) + seed * 1_000_003
    files = tf.data.Dataset.from_tensor_slices(list(source.files))
    files = files.shuffle(len(source.files), seed=epoch_seed)
    records = _records(files, source).shuffle(
        max(1, min(shuffle_buffer, source.num_examples)), seed=epoch_seed + 1)
    return records.batch(batch_size, drop_remainder=True).take(batches)


def start_position(source: SplitSource, batch_size: int, start_step: int,
                   local_replicas: int = 1, micro_batches: int = 1) -> tuple[int, int, int]:
    """(data epoch, batches to skip in it, batches per epoch) of a pipeline at `start_step`.

    A data epoch is a whole number of steps of this pipeline (`local_replicas` batches of
    each of `micro_batches` micro-batches), so the examples of a step are the same whether
    one replica takes a batch of 16 or two replicas take 8 each, or one replica takes two
    micro-batches of 8: a resume may change the split of the same global batch.
    """
    per_step = local_replicas * micro_batches
    steps_per_epoch = source.num_examples // (batch_size * per_step)
    if steps_per_epoch < 1:
        raise DataError(
            f"{source.split_dir} has {source.num_examples} examples per input pipeline, fewer "
            f"than one step of {per_step} batch(es) of {batch_size}.")
    epoch, step_in_epoch = divmod(start_step, steps_per_epoch)
    return epoch, step_in_epoch * per_step, steps_per_epoch * per_step


def _with_position(batch, index, start_step: int, batch_size: int, share: PipelineShare,
                   micro_batches: int = 1):
    """Adds the step of the `index`-th batch since `start_step` (one per row) and its rows'
    places in the global batch: a row's place is its record's place in the step's share of
    the stream (pipelines own consecutive blocks, as TPU hosts do), so an example keeps its
    place, hence its mask, however the step is split into replicas and micro-batches."""
    local = tf.cast(index, tf.int32)
    micro, in_micro = local // share.batches_per_step, local % share.batches_per_step
    batches_before = (share.pipeline_id * micro_batches + micro % micro_batches) \
        * share.batches_per_step + in_micro
    # Per row, not a scalar: every input is split along the batch over the devices.
    step = tf.fill([batch_size], start_step + micro // micro_batches)
    return {**batch, STEP: step,
            ROW: batches_before * batch_size + tf.range(batch_size, dtype=tf.int32)}


def seed_shuffles(seed: int) -> None:
    """Call after `keras.utils.set_random_seed(seed)`, which makes `seed` TensorFlow's global
    seed. TensorFlow's op seeding (random_seed.get_seed) compares (global seed % (2**31 - 1),
    op seed) with (0, 0) in Python: with our symbolic per-epoch shuffle seeds that reads a
    tensor as a bool and fails when the first is 0 (seeds 0 and 2**31 - 1). Those two take
    global seed 1 instead; their per-epoch op seeds, which hold `seed`, still differ."""
    if seed % (2**31 - 1) == 0:
        tf.random.set_seed(1)


def train_dataset(source: SplitSource, batch_size: int, seed: int, start_step: int = 0,
                  shuffle_buffer: int = 2**16, share: PipelineShare = PipelineShare(),
                  micro_batches: int = 1) -> tf.data.Dataset:
    """Endless batches of `{input_ids, attention_mask}` (int32) with their `step` and `row`,
    starting at `start_step` (`micro_batches` batches per replica per step)."""
    first_epoch, skip, per_epoch = start_position(source, batch_size, start_step,
                                                  share.batches_per_step, micro_batches)
    epochs = tf.data.Dataset.range(first_epoch, 2**62)
    batches = epochs.flat_map(
        lambda e: _one_epoch(source, e, batch_size, seed, shuffle_buffer, per_epoch)).skip(skip)
    return batches.enumerate().map(
        lambda i, b: _with_position(_parse(b, source.max_length), i, start_step, batch_size,
                                    share, micro_batches),
        num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def eval_dataset(source: SplitSource, batch_size: int, max_batches: int | None = None,
                 local_replicas: int = 1):
    """One pass in file order (no shuffle), so every evaluation sees the same batches.

    The batch count is a multiple of `local_replicas` so every replica gets a full batch
    at every step (fixed shapes for XLA).
    """
    num_batches = source.min_examples // batch_size // local_replicas * local_replicas
    if max_batches:
        num_batches = min(num_batches, max_batches * local_replicas)
    if num_batches < 1:
        raise DataError(
            f"{source.split_dir} has {source.num_examples} examples per input pipeline, fewer "
            f"than one evaluation batch of {batch_size} per replica.")
    files = tf.data.Dataset.from_tensor_slices(list(source.files))
    batches = _records(files, source).batch(batch_size, drop_remainder=True).take(num_batches)
    batches = batches.apply(tf.data.experimental.assert_cardinality(num_batches))
    return batches.map(lambda b: _parse(b, source.max_length),
                       num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def train_dataset_fn(source: SplitSource, per_replica_batch_size: int, seed: int,
                     start_step: int = 0, shuffle_buffer: int = 2**16,
                     micro_batches: int = 1):
    """A function of a `PipelineShare`: each host reads only its files (or its share of the
    records when there are fewer files than hosts). The seed is the same on every host, so
    record shares of a common file order stay disjoint."""
    def dataset_fn(share: PipelineShare):
        mine = source.for_pipeline(share.pipeline_id, share.num_pipelines)
        return train_dataset(mine, per_replica_batch_size, seed, start_step, shuffle_buffer,
                             share, micro_batches)
    return dataset_fn


def eval_dataset_fn(source: SplitSource, per_replica_batch_size: int,
                    max_batches: int | None = None):
    """Evaluation shares by records: every host then runs the same number of batches."""
    def dataset_fn(share: PipelineShare):
        mine = source.for_pipeline(share.pipeline_id, share.num_pipelines, by_records=True)
        return eval_dataset(mine, per_replica_batch_size, max_batches, share.batches_per_step)
    return dataset_fn
