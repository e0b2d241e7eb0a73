"""The two input pipelines (trainer/data/data_tf.py for TensorFlow, trainer/data/data_grain.py for
JAX, TensorFlow-free) give identical batches, and the grain one keeps every guarantee: re-iterable,
prefetch threads that end, checksums checked, a changed split or a lost shard named in one line,
and no TensorFlow at all."""

import gc
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from common import tfrecord
from tests.support import no_tensorflow
from tests.trainer.mlm_data import make_tokenizer, repetitive_sequences, write_split
from trainer.data import read_errors
from trainer.data import splits as data

TF, GRAIN = data.TF_DATA, data.GRAIN


@pytest.fixture(scope="module")
def info(tmp_path_factory):
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _rows(num, seed=3):
    """Rows made distinct by their first two words, so rows identify examples."""
    ids, mask = repetitive_sequences(num, seed=seed)
    ids[:, 1], ids[:, 2] = 5 + np.arange(num) % 95, 5 + np.arange(num) // 95
    return ids, mask


@pytest.fixture(scope="module")
def split(tmp_path_factory, info):
    path = str(tmp_path_factory.mktemp("split"))
    write_split(path, *_rows(203), info, num_shards=4)  # uneven: 51, 51, 51, 50
    return data.resolve_split(path, info)


def _numpy(batch) -> dict:
    return {key: np.asarray(value) for key, value in batch.items()}


def _batches(dataset, n) -> list:
    iterator = iter(dataset)
    return [_numpy(next(iterator)) for _ in range(n)]


def _assert_same(one, two):
    assert len(one) == len(two)
    for index, (a, b) in enumerate(zip(one, two)):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key].dtype == b[key].dtype == np.int32, key
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"batch {index} {key}")


@pytest.mark.parametrize(
    "batch, start_step, share, micro, batches",
    [
        (8, 0, data.PipelineShare(), 1, 60),  # 25 batches an epoch: more than two epochs
        (8, 37, data.PipelineShare(), 1, 30),  # a resume mid-epoch, across the next epoch
        (4, 3, data.PipelineShare(5, 8), 1, 16),  # hosts sharing by records (4 files, 8 hosts)
        (4, 0, data.PipelineShare(1, 2), 1, 30),  # hosts sharing by files
        (2, 11, data.PipelineShare(0, 1, 2), 3, 40),  # two replicas, three micro-batches
    ],
)
def test_both_pipelines_give_identical_training_batches(
    split, batch, start_step, share, micro, batches
):
    fn = data.train_dataset_fn(
        split, batch, seed=7, start_step=start_step, shuffle_buffer=24, micro_batches=micro
    )
    tf_batches = _batches(fn(share), batches)
    grain_batches = _batches(
        fn(
            data.PipelineShare(
                share.pipeline_id, share.num_pipelines, share.batches_per_step, GRAIN
            )
        ),
        batches,
    )
    _assert_same(tf_batches, grain_batches)


def test_both_pipelines_give_identical_evaluation_batches(split):
    fn = data.eval_dataset_fn(split, 4)
    for share in (data.PipelineShare(), data.PipelineShare(2, 3, 2)):
        grain_share = data.PipelineShare(
            share.pipeline_id, share.num_pipelines, share.batches_per_step, GRAIN
        )
        _assert_same(_batches(fn(share), 8), _batches(fn(grain_share), 8))


def test_the_grain_datasets_start_afresh_at_every_iteration(split):
    """Keras' JAX `fit` iterates the validation data anew at every evaluation."""
    evaluation = data.eval_dataset(split, 16, pipeline=GRAIN)
    one, two = list(evaluation), list(evaluation)
    assert len(one) == 203 // 16
    _assert_same([_numpy(b) for b in one], [_numpy(b) for b in two])
    train = data.train_dataset(split, 8, seed=1, share=data.PipelineShare(pipeline=GRAIN))
    _assert_same(_batches(train, 3), _batches(train, 3))


def _prefetch_threads() -> int:
    return sum(t.name.startswith("grain-thread-prefetch") for t in threading.enumerate())


def test_a_dropped_grain_iterator_stops_its_prefetch_thread(split):
    """Keras peeks at two batches of a dataset and drops that iterator; so a `fit` ends."""
    before = _prefetch_threads()
    train = data.train_dataset(split, 8, seed=1, share=data.PipelineShare(pipeline=GRAIN))
    iterator = iter(train)
    next(iterator)
    assert _prefetch_threads() == before + 1
    del iterator
    gc.collect()
    assert _prefetch_threads() == before


def _corrupt_first_record(path):
    with open(path, "r+b") as f:
        f.seek(12 + 3)  # inside the first record's data: its checksum no longer matches
        byte = f.read(1)
        f.seek(12 + 3)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("pipeline", [TF, GRAIN])
def test_a_record_failing_its_checksum_is_one_line(tmp_path, info, pipeline):
    write_split(str(tmp_path / "bad"), *_rows(48), info, num_shards=2)
    source = data.resolve_split(str(tmp_path / "bad"), info)
    _corrupt_first_record(source.files[1])
    with pytest.raises(read_errors.UnparsableRecordError) as caught:
        with read_errors.replaced_splits_named(source):
            list(data.eval_dataset(source, 8, pipeline=pipeline))
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"a record of {tmp_path / 'bad'} ")
    assert "python -m common.verify" in message
    if pipeline == GRAIN:
        assert "bad data checksum" in message


@pytest.mark.parametrize("pipeline", [TF, GRAIN])
def test_a_deleted_shard_and_a_replaced_split_are_one_line(tmp_path, info, pipeline):
    split_dir = str(tmp_path / "train")
    old = write_split(split_dir, *_rows(48), info, num_shards=3)
    source = data.resolve_split(split_dir, info)
    share = data.PipelineShare(pipeline=pipeline)
    os.remove(old[1])
    with pytest.raises(read_errors.MissingShardError) as caught:
        with read_errors.replaced_splits_named(source):
            _batches(data.train_dataset(source, 4, seed=0, share=share), 12)
    assert str(caught.value).startswith(f"{old[1]} is gone although")
    write_split(split_dir, *_rows(30, seed=9), info, num_shards=1)  # a prepare rerun
    with pytest.raises(read_errors.SplitReplacedError, match="changed while this run was reading"):
        with read_errors.replaced_splits_named(source):
            _batches(data.train_dataset(source, 4, seed=0, share=share), 12)


_WITHOUT_TENSORFLOW = """
import json, sys
import numpy as np
from common import tokenizer_files
from common import tfrecord
from trainer.data import splits as data
_, info = tokenizer_files.load(sys.argv[1])
source = data.resolve_split(sys.argv[2], info)
share = data.PipelineShare(0, 1, 1, data.GRAIN)
train = data.train_dataset_fn(source, 8, seed=7, start_step=5)(share)
it = iter(train)
ids = [np.asarray(next(it)["input_ids"]).sum() for _ in range(30)]
evaluation = data.eval_dataset_fn(source, 8)(share)
sums = [int(np.asarray(b["input_ids"]).sum()) for b in evaluation]
print(json.dumps({"train": [int(x) for x in ids], "eval": sums,
                  "tf": "tensorflow" in sys.modules and sys.modules["tensorflow"] is not None}))
"""


def test_the_grain_pipeline_reads_a_prepared_split_without_tensorflow(tmp_path, info, split):
    """The JAX machine has no TensorFlow: the pipeline reads a real prepared split there and
    gives the batches the tf.data pipeline gives here."""
    tokenizer = tmp_path / "tok"
    make_tokenizer(tokenizer)
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TENSORFLOW, str(tokenizer), split.split_dir],
        env=no_tensorflow.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["tf"] is False
    expected = _batches(data.train_dataset(split, 8, seed=7, start_step=5), 30)
    assert found["train"] == [int(b["input_ids"].sum()) for b in expected]
    assert found["eval"] == [
        int(np.asarray(b["input_ids"]).sum()) for b in data.eval_dataset(split, 8)
    ]


def test_a_shard_shorter_than_its_manifest_is_one_line_not_a_short_batch(tmp_path, info):
    old = write_split(str(tmp_path / "short"), *_rows(40), info, num_shards=2)
    source = data.resolve_split(str(tmp_path / "short"), info)
    with open(old[0], "rb") as f:
        records = list(tfrecord.records(f))
    with open(old[0], "wb") as f:  # same name, 5 records fewer than the manifest counts
        f.write(tfrecord.frame(records[:-5]))
    with pytest.raises(
        read_errors.UnparsableRecordError, match=f"{old[0]} ends before its record 15"
    ):
        with read_errors.replaced_splits_named(source):
            list(data.eval_dataset(source, 4, pipeline=GRAIN))


def test_the_tf_data_pipeline_has_no_python_call(split):
    """A TensorFlow TPU pod runs each host's input pipeline on that host, away from the
    client's Python: the order must be graph ops, no `py_function`/`numpy_function`."""
    dataset = data.train_dataset(split, 8, seed=7, start_step=3, shuffle_buffer=24)
    graph = dataset._as_serialized_graph().numpy()
    assert b"TFRecordDataset" in graph and b"PyFunc" not in graph
