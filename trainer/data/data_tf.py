"""The TensorFlow backend's input: tf.data pipelines in the order `trainer/data/data_order.py`
decides (the same batches as the JAX backend's `data_grain.py`).

The first epoch's reads are that module's plan (it holds the resume position); later epochs'
file order, record sharing and every window's permutation are its arithmetic evaluated in
graph ops (`data_order.sort_keys`, `shard_reads`), so the pipeline has no Python call and runs
where TPUStrategy puts it (a TPU pod's input hosts). Records are read by `TFRecordDataset` and
parsed with ONE `parse_example` per batch. tf.data is kept here: TPUStrategy's
`distribute_datasets_from_function` wants it.

`pipeline` below is the duck-typed share of a split (`trainer.data.splits.SplitSource`: files,
counts, record_shard, max_length); `trainer/data/splits.py` builds these datasets.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from common import schema
from trainer.data import data_order

# data_order's hash with TensorFlow's xor and shift (tensors have no `^`/`>>` for integers).
_BITS = (
    tf.bitwise.bitwise_xor,
    lambda x, places: tf.bitwise.right_shift(x, tf.constant(places, tf.int64)),
)


def _parse(serialized, max_length: int) -> dict:
    """One vectorised parse per batch; int32 halves what goes to the accelerator."""
    parsed = schema.parse_batch(serialized, max_length)
    return {name: tf.cast(parsed[name], tf.int32) for name in schema.FEATURES}


def _read_columns(reads) -> np.ndarray:
    """[file, first, stride, count] per read, int64 [n, 4]."""
    return np.array([[r.file, r.first, r.stride, r.count] for r in reads], np.int64).reshape(-1, 4)


def _records(files, columns) -> tf.data.Dataset:
    """The records the reads keep, file after file (sequential: the order is the plan's)."""
    paths = tf.gather(tf.constant(list(files)), columns[:, 0])
    reads = tf.data.Dataset.from_tensor_slices((paths, columns[:, 1], columns[:, 2], columns[:, 3]))
    return reads.interleave(
        lambda path, first, stride, count: (
            tf.data.TFRecordDataset(path, buffer_size=8 << 20)
            .skip(first)
            .shard(stride, 0)
            .take(count)
        ),
        cycle_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


def _shuffled(records, seed: int, epoch, first_window, size: int):
    """`records` cut into windows of `size`, each permuted as `data_order.window_permutation`
    does (the same keys, sorted here by TensorFlow: graph ops only)."""

    def permuted(number, window):
        positions = tf.range(tf.size(window, tf.int64), dtype=tf.int64)
        keys = data_order.sort_keys(
            seed, data_order.WINDOW_TAG, epoch, first_window + number, positions, _BITS
        )
        return tf.gather(window, tf.argsort(keys, stable=True))

    return records.batch(size).enumerate().map(permuted).unbatch()


def _epoch_columns(pipeline, seed: int, epoch):
    """`_read_columns` of a whole data epoch, in graph ops (`data_order.shard_reads`)."""
    files = tf.range(len(pipeline.files), dtype=tf.int64)
    keys = data_order.sort_keys(seed, data_order.FILES_TAG, epoch, 0, files, _BITS)
    order = tf.cast(tf.argsort(keys, stable=True), tf.int64)
    sizes = tf.gather(tf.constant(pipeline.counts, tf.int64), order)
    first, count = data_order.shard_reads(
        sizes, tf.cumsum(sizes, exclusive=True), pipeline.record_shard
    )
    stride = (pipeline.record_shard or (0, 1))[1]
    columns = tf.stack([order, first, tf.fill(tf.shape(order), np.int64(stride)), count], 1)
    return tf.boolean_mask(columns, count > 0)


def _epochs(pipeline, seed: int, window: int, used: int, first_epoch: int, start: int):
    """The shuffled records of every data epoch from `first_epoch`'s `start`-th on: that
    epoch's plan computed here, the next ones' in the graph (endless)."""
    plan = data_order.epoch_plan(
        pipeline.counts, pipeline.record_shard, seed, first_epoch, window, used, start
    )
    first = _shuffled(
        _records(pipeline.files, tf.constant(_read_columns(plan.reads))),
        seed,
        np.int64(first_epoch),
        np.int64(plan.first_window),
        plan.window,
    )
    first = first.skip(plan.skip).take(plan.take)
    size = data_order.epoch_plan(
        pipeline.counts, pipeline.record_shard, seed, 0, window, used
    ).window  # the same every epoch
    later = tf.data.Dataset.range(first_epoch + 1, 2**62).flat_map(
        lambda e: _shuffled(
            _records(pipeline.files, _epoch_columns(pipeline, seed, e)), seed, e, np.int64(0), size
        ).take(used)
    )
    return first.concatenate(later)


def _with_position(
    batch, index, start_step: int, batch_size: int, share, micro_batches: int
) -> dict:
    step, first_row = data_order.batch_position(
        tf.cast(index, tf.int32),
        start_step,
        batch_size,
        share.pipeline_id,
        share.batches_per_step,
        micro_batches,
    )
    # Per row, not a scalar: every input is split along the batch over the devices.
    return {
        **batch,
        data_order.STEP: tf.fill([batch_size], step),
        data_order.ROW: first_row + tf.range(batch_size, dtype=tf.int32),
    }


def train_dataset(
    pipeline,
    batch_size: int,
    seed: int,
    window: int,
    start_step: int,
    position: tuple,
    share,
    micro_batches: int = 1,
) -> tf.data.Dataset:
    """Endless batches of `{input_ids, attention_mask, step, row}` (int32) from `start_step`;
    `position` is `data_order.start_position`'s (epoch, batches to skip, batches per epoch)."""
    first_epoch, skip, per_epoch = position
    records = _epochs(
        pipeline, seed, window, per_epoch * batch_size, first_epoch, skip * batch_size
    )
    batches = records.batch(batch_size, drop_remainder=True)  # epochs end on a batch
    return (
        batches.enumerate()
        .map(
            lambda i, b: _with_position(
                _parse(b, pipeline.max_length), i, start_step, batch_size, share, micro_batches
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        .prefetch(tf.data.AUTOTUNE)
    )


def eval_dataset(pipeline, batch_size: int, num_batches: int) -> tf.data.Dataset:
    """`num_batches` batches of the features, one unshuffled pass in the listing order."""
    columns = _read_columns(data_order.eval_reads(pipeline.counts, pipeline.record_shard))
    records = _records(pipeline.files, tf.constant(columns))
    batches = records.batch(batch_size, drop_remainder=True).take(num_batches)
    batches = batches.apply(tf.data.experimental.assert_cardinality(num_batches))
    return batches.map(
        lambda b: _parse(b, pipeline.max_length), num_parallel_calls=tf.data.AUTOTUNE
    ).prefetch(tf.data.AUTOTUNE)
