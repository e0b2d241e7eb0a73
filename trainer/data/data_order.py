"""The order of the input stream, decided once for both input pipelines (numpy only).

The TensorFlow backend reads with tf.data (`trainer/data/data_tf.py`), the JAX backend without
TensorFlow (`trainer/data/data_grain.py`); both ask this module what to read and in which order, so
they give the same batches and cannot drift (tests/trainer/data/test_data_pipelines.py compares
them).

A pipeline's share of a split is its files (in the listing order) and, when hosts share files
by records, `record_shard = (index, count)`: every `count`-th record from `index` of the
concatenation of the files in the epoch's file order (the same order on every host, so the
shares are disjoint). Data epoch `e` of the training stream:

1. file order: a permutation of the pipeline's files drawn from (seed, e);
2. the pipeline's records: the files concatenated in that order, every `count`-th record kept;
3. the shuffle: that sequence cut into windows of `window` records (`--shuffle_buffer_size`;
   the last one shorter), each window permuted by (seed, e, window). Not tf.data's buffer
   shuffle: its order depends on its own sampling and cannot be computed outside TensorFlow,
   while a window's permutation is a pure function both pipelines compute exactly, and a
   resume can start at any window without reading the ones before it.

A permutation is the stable argsort of hashed keys (`sort_keys`: an xor-shift-multiply hash
in int64 arithmetic, given the library's xor and shift), which numpy arrays and TensorFlow
tensors evaluate bit for bit: the tf.data pipeline computes it in graph ops, with no Python
call, so it also runs on the remote input hosts of a TensorFlow TPU pod (where
`tf.numpy_function` cannot);
4. the epoch's first `used` shuffled records (whole steps) are batched in order; the rest of
   the last window is dropped this epoch (another epoch puts other records there).

A resume at a record of an epoch reads from the start of that record's window (the files
before it are skipped by their manifest counts, unread) and drops the window's records before
it. Evaluation reads the files in the listing order, unshuffled.

Example:
    >>> plan = epoch_plan((50, 50), (), seed=5, epoch=0, window=64, used=96)
    >>> [r.file for r in plan.reads], plan.first_window, plan.skip, plan.take
    ([1, 0], 0, 0, 96)
"""

from __future__ import annotations

import dataclasses

import numpy as np

STEP, ROW = "step", "row"  # what a training batch carries besides schema.FEATURES

FILES_TAG, WINDOW_TAG = 0, 1  # domain tags: the file order and the windows never share keys
_M = 2**32  # the keys are 32-bit; every product below stays under 2**63 (int64)


@dataclasses.dataclass(frozen=True)
class Read:
    """Records of one file, in order: from record `first`, every `stride`-th, `count` of them."""

    file: int  # index into the pipeline's files (listing order)
    first: int
    stride: int
    count: int


@dataclasses.dataclass(frozen=True)
class EpochPlan:
    """What one pipeline reads for (part of) one data epoch: the `reads` in order, cut into
    windows of `window` records numbered from `first_window`, each permuted by
    `window_permutation`; of the permuted records, `skip` are dropped, then `take` given."""

    epoch: int
    reads: tuple
    window: int
    first_window: int
    skip: int
    take: int


NUMPY_BITS = (np.bitwise_xor, np.right_shift)  # (xor, right shift) of int64 values


def _mix(x, bits):
    """A 32-bit hash of 32-bit values (lowbias32's shape; multipliers under 2**31, so every
    product stays under 2**63 in int64). Checked: a window's permutations are uniform."""
    xor, shift = bits
    for multiplier, places in ((0x7FEB352D, 16), (0x2C1B3C6D, 15), (0x297A2D39, 15)):
        x = xor(x, shift(x, places)) * multiplier % _M
    return xor(x, shift(x, 16))


def sort_keys(seed: int, tag: int, epoch, window, positions, bits=NUMPY_BITS):
    """Keys whose stable argsort is the permutation of `positions` (int64, numpy or, with
    TensorFlow's `bits`, tensors; `epoch` and `window` may be tensors too)."""
    key = _mix(np.int64(seed % _M), bits)
    for part in (tag, epoch, window):
        key = _mix((key + part % _M) % _M, bits)
    return _mix((key + positions * 0x61C88647 % _M) % _M, bits)


def file_order(num_files: int, seed: int, epoch: int) -> np.ndarray:
    keys = sort_keys(seed, FILES_TAG, epoch, 0, np.arange(num_files, dtype=np.int64))
    return np.argsort(keys, kind="stable")


def window_permutation(seed: int, epoch: int, window: int, size: int) -> np.ndarray:
    """The order of the `size` records of window `window` of data epoch `epoch`."""
    keys = sort_keys(seed, WINDOW_TAG, epoch, window, np.arange(size, dtype=np.int64))
    return np.argsort(keys, kind="stable")


def shard_reads(sizes, offsets, record_shard):
    """(first, count) per file of a whole epoch, vectorised, for files of `sizes` records at
    `offsets` in the epoch's file order (`reads` with start 0, in arithmetic both numpy and
    TensorFlow evaluate; a file none of whose records is kept gets count 0)."""
    index, stride = record_shard or (0, 1)
    first = (index - offsets) % stride
    count = (sizes - first + stride - 1) // stride
    return first, (count + abs(count)) // 2  # max(count, 0) without a library call


def num_records(counts, record_shard=()) -> int:
    """Records of a pipeline's share: all of its files', or every count-th from index."""
    total = int(sum(counts))
    if not record_shard:
        return total
    index, count = record_shard
    return max(0, (total - index + count - 1) // count)


def reads(counts, record_shard, order, start: int = 0) -> list[Read]:
    """The reads that give a pipeline's records from its `start`-th on, files in `order`.
    Files before the start are skipped by their counts, unread."""
    index, stride = record_shard or (0, 1)
    position = index + start * stride  # in the concatenation of the files in `order`
    out, offset = [], 0
    for file in order:
        size = int(counts[file])
        if offset <= position < offset + size:
            first = position - offset
            count = (size - first + stride - 1) // stride
            out.append(Read(int(file), first, stride, count))
            position += count * stride
        offset += size
    return out


def epoch_plan(
    counts, record_shard, seed: int, epoch: int, window: int, used: int, start: int = 0
) -> EpochPlan:
    """Data epoch `epoch` of the training stream from its `start`-th shuffled record to its
    `used`-th (exclusive): the first window read is the one holding `start`."""
    window = max(1, min(window, num_records(counts, record_shard)))
    first_window = start // window
    order = file_order(len(counts), seed, epoch)
    return EpochPlan(
        epoch,
        tuple(reads(counts, record_shard, order, first_window * window)),
        window,
        first_window,
        start - first_window * window,
        used - start,
    )


def eval_reads(counts, record_shard) -> list[Read]:
    """One unshuffled pass in the listing order."""
    return reads(counts, record_shard, range(len(counts)))


def steps_per_epoch(records: int, batch_size: int, per_step: int) -> int:
    """Whole steps of `per_step` batches in a data epoch (0: not even one)."""
    return records // (batch_size * per_step)


def start_position(
    records: int, batch_size: int, start_step: int, per_step: int
) -> tuple[int, int, int]:
    """(data epoch, batches to skip in it, batches per epoch) of a pipeline at `start_step`:
    a data epoch is a whole number of steps of `per_step` batches each (replicas x
    micro-batches), so a resume may change how a step's examples are split."""
    steps = steps_per_epoch(records, batch_size, per_step)
    if steps < 1:
        raise ValueError(
            f"{records} records are less than one step of {per_step} batch(es) of {batch_size}"
        )
    epoch, step_in_epoch = divmod(start_step, steps)
    return epoch, step_in_epoch * per_step, steps * per_step


def batch_position(
    index,
    start_step,
    batch_size: int,
    pipeline_id: int,
    batches_per_step: int,
    micro_batches: int = 1,
):
    """(step, first row in the global batch) of this pipeline's `index`-th batch since
    `start_step`: a row's place is its record's place in the step's share of the stream
    (pipelines own consecutive blocks, as TPU hosts do), so an example keeps its place, hence
    its mask, however the step is split into replicas and micro-batches. Plain arithmetic:
    `index` may be an int, a numpy or a TensorFlow integer."""
    micro, in_micro = index // batches_per_step, index % batches_per_step
    batches_before = (
        pipeline_id * micro_batches + micro % micro_batches
    ) * batches_per_step + in_micro
    return start_step + micro // micro_batches, batches_before * batch_size


def shuffled(plan: EpochPlan, seed: int, windows):
    """The records of `plan` in stream order, from `windows` (lists of the records of each
    window read, in read order): each permuted, `skip` dropped, `take` given."""
    skip, left = plan.skip, plan.take
    for number, records in enumerate(windows, plan.first_window):
        if left <= 0:
            return
        order = window_permutation(seed, plan.epoch, number, len(records))[skip : left + skip]
        skip, left = 0, left - len(order)
        yield from (records[i] for i in order)
