"""trainer/data/data_order.py: the stream's order, decided once for both input pipelines (numpy
only, no files: a record is named by its place in the concatenation of the files in listing
order)."""

import itertools

import numpy as np
import pytest

from trainer.data import data_order

COUNTS = (7, 13, 5, 11, 9)  # 45 records, uneven files


def _materialize(plan, counts=COUNTS):
    """The record names `plan` gives, reading its windows as a pipeline would."""
    offsets = np.concatenate([[0], np.cumsum(counts)])
    names = (
        int(offsets[r.file]) + r.first + k * r.stride for r in plan.reads for k in range(r.count)
    )
    windows = iter(lambda: list(itertools.islice(names, plan.window)), [])
    return list(data_order.shuffled(plan, 5, windows))


def _epoch(epoch, start=0, counts=COUNTS, shard=(), window=8, used=None):
    total = data_order.num_records(counts, shard)
    return _materialize(
        data_order.epoch_plan(
            counts, shard, 5, epoch, window, total if used is None else used, start
        ),
        counts,
    )


def test_each_epoch_is_a_new_permutation_of_all_records():
    epochs = [_epoch(e) for e in range(3)]
    for records in epochs:
        assert sorted(records) == list(range(45))
    assert epochs[0] != epochs[1] != epochs[2]
    # A window longer than a file mixes the records of several files.
    offsets = np.cumsum(COUNTS)
    first = _epoch(0, window=16)[:16]
    assert len({int(np.searchsorted(offsets, r, side="right")) for r in first}) > 1


def test_hosts_sharing_by_records_get_disjoint_complete_shares():
    shares = [_epoch(2, shard=(i, 4)) for i in range(4)]
    assert (
        [len(s) for s in shares]
        == [data_order.num_records(COUNTS, (i, 4)) for i in range(4)]
        == [12, 11, 11, 11]
    )
    assert sorted(itertools.chain(*shares)) == list(range(45))


@pytest.mark.parametrize("shard", [(), (1, 3)])
def test_a_resume_at_any_record_is_the_stream_skipped_to_it(shard):
    used = data_order.num_records(COUNTS, shard) - 3  # the epoch's whole batches
    full = _epoch(4, shard=shard, used=used)
    assert len(full) == used
    for start in range(used):
        assert _epoch(4, start, shard=shard, used=used) == full[start:], start


def test_a_resume_reads_neither_the_files_nor_the_windows_before_it():
    whole = data_order.epoch_plan(COUNTS, (), 5, 0, 8, 45)
    late = data_order.epoch_plan(COUNTS, (), 5, 0, 8, 45, start=35)
    assert late.first_window == 4 and late.skip == 3 and late.take == 10
    assert sum(r.count for r in late.reads) == 45 - 32  # from window 4's first record on
    assert len(late.reads) < len(whole.reads)


def test_a_window_larger_than_the_share_is_one_permutation_of_it():
    plan = data_order.epoch_plan(COUNTS, (), 5, 0, 2**16, 45)
    assert plan.window == 45 and sorted(_materialize(plan)) == list(range(45))


def test_eval_reads_every_record_once_in_listing_order():
    reads = data_order.eval_reads(COUNTS, (2, 4))
    assert [r.file for r in reads] == [0, 1, 2, 3, 4]
    plan = data_order.EpochPlan(0, tuple(reads), 1, 0, 0, 11)
    offsets = np.concatenate([[0], np.cumsum(COUNTS)])
    names = [int(offsets[r.file]) + r.first + k * r.stride for r in reads for k in range(r.count)]
    assert names == list(range(2, 45, 4)) and plan.take == len(names)


@pytest.mark.parametrize("pipelines, per_step, micro", [(1, 1, 1), (2, 2, 1), (2, 1, 3), (4, 2, 2)])
def test_the_rows_of_a_step_are_its_global_batch_once_each(pipelines, per_step, micro):
    """Every (pipeline, batch) of a step gets its own block of rows: together 0..global-1."""
    batch = 4
    for step in (0, 1, 7):
        rows, steps = [], set()
        for pipeline in range(pipelines):
            for index in range(step * per_step * micro, (step + 1) * per_step * micro):
                s, first = data_order.batch_position(index, 0, batch, pipeline, per_step, micro)
                steps.add(s)
                rows += range(first, first + batch)
        assert steps == {step}
        assert sorted(rows) == list(range(pipelines * per_step * micro * batch))


def test_a_share_too_small_for_one_step_is_refused():
    with pytest.raises(ValueError, match="less than one step"):
        data_order.start_position(10, 4, 0, per_step=3)
    assert data_order.start_position(45, 4, 13, per_step=2) == (2, 6, 10)  # 5 steps an epoch


@pytest.mark.parametrize("shard", [(), (0, 3), (2, 3)])
def test_the_vectorised_epoch_reads_are_the_reads(shard):
    """`shard_reads` (what the tf.data pipeline evaluates in graph ops) agrees with `reads`."""
    order = data_order.file_order(len(COUNTS), 5, 3)
    sizes = np.array(COUNTS, np.int64)[order]
    first, count = data_order.shard_reads(sizes, np.cumsum(sizes) - sizes, shard)
    expected = data_order.reads(COUNTS, shard, order)
    assert [(int(f), int(a), int(c)) for f, a, c in zip(order, first, count) if c > 0] == [
        (r.file, r.first, r.count) for r in expected
    ]


def test_sort_keys_are_the_same_in_tensorflow():
    tf = pytest.importorskip("tensorflow")
    positions = np.arange(5000, dtype=np.int64)
    mine = data_order.sort_keys(2**31 - 1, data_order.WINDOW_TAG, 12345, 67, positions)
    from trainer.data import data_tf

    theirs = data_order.sort_keys(
        2**31 - 1,
        data_order.WINDOW_TAG,
        tf.constant(12345, tf.int64),
        tf.constant(67, tf.int64),
        tf.constant(positions),
        data_tf._BITS,
    )
    np.testing.assert_array_equal(mine, theirs.numpy())
    assert mine.min() >= 0 and mine.max() < 2**32 and len(np.unique(mine)) > 4990


def test_window_permutations_are_uniform():
    """Where each of 8 records lands over 4000 windows: a chi-square near its 49 degrees of
    freedom (a weak hash scored ~3500 here), and no trace of the input order in a big one."""
    places = np.zeros((8, 8))
    for window in range(4000):
        places[np.arange(8), np.argsort(data_order.window_permutation(1, 0, window, 8))] += 1
    assert ((places - 500) ** 2 / 500).sum() < 100
    big = data_order.window_permutation(1, 0, 0, 65536)
    assert abs(np.corrcoef(np.arange(65536), big)[0, 1]) < 0.02
