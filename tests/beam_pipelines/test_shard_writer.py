"""The TFRecord framing comes from Beam's private `_TFRecordUtil` (the only TensorFlow-free
writer installed): this fails loudly if a Beam upgrade moves or changes it."""

import tensorflow as tf

from beam_pipelines.shard_writer import tfrecord_bytes
from common import verify


def test_framing_is_what_tensorflow_reads_and_verify_counts(tmp_path):
    records = [b"", b"a", b"x" * 70_000]
    path = tmp_path / "s.tfrecord"
    path.write_bytes(tfrecord_bytes(records))
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == records
    assert verify.count_records(path.read_bytes(), str(path)) == 3
