"""The TensorFlow backend's input: tf.data pipelines in the order `trainer/data_order.py`
decides (the same batches as the JAX backend's `data_grain.py`).

The file reads of an epoch and each window's permutation come from that module through
`tf.numpy_function` (a few calls per epoch and per window, not per record); records are read
by `TFRecordDataset` and parsed with ONE `parse_example` per batch. tf.data is kept here:
TPUStrategy's `distribute_datasets_from_function` wants it.

`pipeline` below is the duck-typed share of a split (`trainer.data.SplitSource`: files,
counts, record_shard, max_length); `trainer/data.py` builds these datasets.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from common import schema
from trainer import data_order


def _parse(serialized, max_length: int) -> dict:
    """One vectorised parse per batch; int32 halves what goes to the accelerator."""
    parsed = schema.parse_batch(serialized, max_length)
    return {name: tf.cast(parsed[name], tf.int32) for name in schema.FEATURES}


def _read_columns(reads) -> np.ndarray:
    """[file, first, stride, count] per read, int64 [n, 4]."""
    return np.array([[r.file, r.first, r.stride, r.count] for r in reads],
                    np.int64).reshape(-1, 4)


def _records(files, columns) -> tf.data.Dataset:
    """The records the reads keep, file after file (sequential: the order is the plan's)."""
    paths = tf.gather(tf.constant(list(files)), columns[:, 0])
    reads = tf.data.Dataset.from_tensor_slices((paths, columns[:, 1], columns[:, 2],
                                                columns[:, 3]))
    return reads.interleave(
        lambda path, first, stride, count: tf.data.TFRecordDataset(
            path, buffer_size=8 << 20).skip(first).shard(stride, 0).take(count),
        cycle_length=1, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _epoch_fn(pipeline, seed: int, window: int, used: int):
    """(epoch, start) -> the epoch's shuffled records from its `start`-th to `used`."""
    def plan(epoch, start):
        found = data_order.epoch_plan(pipeline.counts, pipeline.record_shard, seed,
                                      int(epoch), window, used, int(start))
        return (_read_columns(found.reads), np.int64(found.window),
                np.int64(found.first_window), np.int64(found.skip), np.int64(found.take))

    def permutation(epoch, number, size):
        return data_order.window_permutation(seed, int(epoch), int(number),
                                             int(size)).astype(np.int64)

    def one_epoch(epoch, start):
        columns, size, first_window, skip, take = tf.numpy_function(
            plan, [epoch, start], [tf.int64] * 5, stateful=False)
        columns = tf.reshape(columns, [-1, 4])  # numpy_function's results have no shape
        size, first_window, skip, take = (tf.reshape(x, []) for x in
                                          (size, first_window, skip, take))
        windows = _records(pipeline.files, columns).batch(size).enumerate()
        shuffled = windows.map(lambda i, records: tf.gather(records, tf.reshape(
            tf.numpy_function(permutation, [epoch, first_window + i, tf.size(records,
                                                                             tf.int64)],
                              tf.int64, stateful=False), [-1])))
        return shuffled.unbatch().skip(skip).take(take)
    return one_epoch


def _with_position(batch, index, start_step: int, batch_size: int, share,
                   micro_batches: int) -> dict:
    step, first_row = data_order.batch_position(
        tf.cast(index, tf.int32), start_step, batch_size, share.pipeline_id,
        share.batches_per_step, micro_batches)
    # Per row, not a scalar: every input is split along the batch over the devices.
    return {**batch, data_order.STEP: tf.fill([batch_size], step),
            data_order.ROW: first_row + tf.range(batch_size, dtype=tf.int32)}


def train_dataset(pipeline, batch_size: int, seed: int, window: int, start_step: int,
                  position: tuple, share, micro_batches: int = 1) -> tf.data.Dataset:
    """Endless batches of `{input_ids, attention_mask, step, row}` (int32) from `start_step`;
    `position` is `data_order.start_position`'s (epoch, batches to skip, batches per epoch)."""
    first_epoch, skip, per_epoch = position
    one_epoch = _epoch_fn(pipeline, seed, window, per_epoch * batch_size)
    start = np.int64(skip * batch_size)
    records = tf.data.Dataset.range(first_epoch, 2**62).flat_map(
        lambda e: one_epoch(e, tf.where(e == first_epoch, start, np.int64(0))))
    batches = records.batch(batch_size, drop_remainder=True)  # epochs end on a batch
    return batches.enumerate().map(
        lambda i, b: _with_position(_parse(b, pipeline.max_length), i, start_step, batch_size,
                                    share, micro_batches),
        num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def eval_dataset(pipeline, batch_size: int, num_batches: int) -> tf.data.Dataset:
    """`num_batches` batches of the features, one unshuffled pass in the listing order."""
    columns = _read_columns(data_order.eval_reads(pipeline.counts, pipeline.record_shard))
    records = _records(pipeline.files, tf.constant(columns))
    batches = records.batch(batch_size, drop_remainder=True).take(num_batches)
    batches = batches.apply(tf.data.experimental.assert_cardinality(num_batches))
    return batches.map(lambda b: _parse(b, pipeline.max_length),
                       num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
