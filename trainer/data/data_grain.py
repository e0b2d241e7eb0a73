"""The JAX backend's input, without TensorFlow: shards read with our own framing reader
(`common/tfrecord.py`, both checksums checked) and decoder (`common/schema.decode_examples`,
one vectorised decode per batch) into fixed-shape int32 numpy batches, in the order
`trainer/data/data_order.py` decides (the same batches as the tf.data pipeline, `data_tf.py`).

Why grain: Keras' JAX `fit` takes a grain dataset as it is (a re-iterable `IterDataset`, so
the validation data restarts at every evaluation; a generator is consumed once), and grain's
thread prefetch overlaps reading and decoding with the step, all without TensorFlow.

`pipeline` below is the duck-typed share of a split (`trainer.data.splits.SplitSource`: files,
counts, record_shard, max_length); `trainer/data/splits.py` builds these datasets.
"""

from __future__ import annotations

import itertools

import grain
import numpy as np

from common import fs, schema, tfrecord
from trainer.data import data_order

# Batches decoded ahead of the step. A window's records are read at once (once every
# --shuffle_buffer_size records: ~0.2 s for 65,536 records of 128 ids here), a pause the
# steps of the window's ~2,000 batches amortise.
PREFETCH_BATCHES = 8


def _file_records(path: str, read: data_order.Read):
    """The records `read` keeps of one file, both checksums checked; the others are passed by
    their headers, unread (a resume's start, the other hosts' records)."""
    with fs.open_read(path) as stream:
        records = tfrecord.records(stream)
        for kept in range(read.count):
            gap = read.first if kept == 0 else read.stride - 1
            record = next(records, None) if tfrecord.skip(stream, gap) == gap else None
            if record is None:  # a file shorter than its manifest says: never a short batch
                raise tfrecord.RecordError(
                    f"{path} ends before its record {read.first + kept * read.stride}"
                )
            yield record


def _records(pipeline, reads):
    for read in reads:
        yield from _file_records(pipeline.files[read.file], read)


def _windows(records, size: int):
    while True:
        window = list(itertools.islice(records, size))
        if not window:
            return
        yield window


def _decoded(records: list, max_length: int) -> dict:
    ids, mask = schema.decode_examples(records, max_length)
    # int32: half of what goes to the accelerator, as the tf.data pipeline gives.
    return {schema.INPUT_IDS: ids.astype(np.int32), schema.ATTENTION_MASK: mask.astype(np.int32)}


def _stream(pipeline, seed: int, window: int, position: tuple, batch_size: int):
    """Record lists of one batch each, endless, from batch `skip` of data epoch `first_epoch`."""
    first_epoch, skip, per_epoch = position
    used = per_epoch * batch_size
    for epoch in itertools.count(first_epoch):
        start = skip * batch_size if epoch == first_epoch else 0
        plan = data_order.epoch_plan(
            pipeline.counts, pipeline.record_shard, seed, epoch, window, used, start
        )
        windows = _windows(_records(pipeline, plan.reads), plan.window)
        records = data_order.shuffled(plan, seed, windows)
        for _ in range(plan.take // batch_size):
            yield list(itertools.islice(records, batch_size))


def _train_batches(pipeline, seed, window, position, batch_size, start_step, share, micro_batches):
    stream = _stream(pipeline, seed, window, position, batch_size)
    for index, records in enumerate(stream):
        batch = _decoded(records, pipeline.max_length)
        step, first_row = data_order.batch_position(
            index, start_step, batch_size, share.pipeline_id, share.batches_per_step, micro_batches
        )
        batch[data_order.STEP] = np.full(batch_size, step, np.int32)  # per row: split over devices
        batch[data_order.ROW] = np.arange(first_row, first_row + batch_size, dtype=np.int32)
        yield batch


def _eval_batches(pipeline, batch_size: int, num_batches: int):
    reads = data_order.eval_reads(pipeline.counts, pipeline.record_shard)
    records = _records(pipeline, reads)
    for _ in range(num_batches):
        yield _decoded(list(itertools.islice(records, batch_size)), pipeline.max_length)


class _Batches(grain.IterDataset):
    """A grain dataset of the batches `make()` yields; each `iter` starts them afresh."""

    def __init__(self, make):
        super().__init__()
        self._make = make

    def __iter__(self):
        return _BatchIterator(self._make)


class _BatchIterator(grain.DatasetIterator):
    def __init__(self, make):
        super().__init__()
        self._make, self._batches, self._done = make, make(), 0

    def __next__(self):
        batch = next(self._batches)
        self._done += 1
        return batch

    def get_state(self) -> dict:
        return {"batches": self._done}

    def set_state(self, state: dict) -> None:
        self._batches = itertools.islice(self._make(), state["batches"], None)
        self._done = state["batches"]


class _Prefetched(grain.IterDataset):
    """grain's thread prefetch, stopped when its iterator is dropped: Keras leaves the
    iterators it peeks at (for the batch shapes) and those of finished `fit` calls
    unclosed, and a prefetch thread blocks on its full queue forever otherwise."""

    def __init__(self, parent, buffer: int):
        super().__init__(
            grain.experimental.ThreadPrefetchIterDataset(parent, prefetch_buffer_size=buffer)
        )

    def __iter__(self):
        return _ClosingIterator(self._parent.__iter__())


class _ClosingIterator(grain.DatasetIterator):
    def __init__(self, parent):
        super().__init__(parent)

    def __next__(self):
        return next(self._parent)

    def get_state(self) -> dict:
        return self._parent.get_state()

    def set_state(self, state: dict) -> None:
        self._parent.set_state(state)

    def __del__(self):
        self._parent.close()


def train_dataset(
    pipeline,
    batch_size: int,
    seed: int,
    window: int,
    start_step: int,
    position: tuple,
    share,
    micro_batches: int = 1,
) -> grain.IterDataset:
    """Endless batches of `{input_ids, attention_mask, step, row}` (int32) from `start_step`;
    `position` is `data_order.start_position`'s (epoch, batches to skip, batches per epoch)."""
    return _Prefetched(
        _Batches(
            lambda: _train_batches(
                pipeline, seed, window, position, batch_size, start_step, share, micro_batches
            )
        ),
        PREFETCH_BATCHES,
    )


def eval_dataset(pipeline, batch_size: int, num_batches: int) -> grain.IterDataset:
    """`num_batches` batches of the features, one unshuffled pass; every `iter` the same."""
    return _Prefetched(
        _Batches(lambda: _eval_batches(pipeline, batch_size, num_batches)), PREFETCH_BATCHES
    )
