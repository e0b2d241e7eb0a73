"""common/tfrecord.py: the framing TensorFlow reads and writes, and every damage caught."""

import io

import pytest
import tensorflow as tf

from common import tfrecord

RECORDS = [b"", b"a", b"x" * 70_000, bytes(range(256))]


def test_tensorflow_reads_what_frame_writes(tmp_path):
    path = tmp_path / "ours.tfrecord"
    path.write_bytes(tfrecord.frame(RECORDS))
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == RECORDS


def test_records_reads_what_tensorflow_writes(tmp_path):
    path = tmp_path / "tf.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in RECORDS:
            writer.write(record)
    data = path.read_bytes()
    assert data == tfrecord.frame(RECORDS)  # byte for byte
    assert list(tfrecord.records(io.BytesIO(data))) == RECORDS


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda d: d[:5], "cut short: 5 of a record header's 12 bytes"),
        (lambda d: d[:-1], "cut short"),
        (lambda d: d[:3] + b"\xff" + d[4:], "bad length checksum"),
        (lambda d: d[:-7] + bytes([d[-7] ^ 1]) + d[-6:], "bad data checksum"),
        (lambda d: d[:-2] + bytes([d[-2] ^ 1]) + d[-1:], "bad data checksum"),
    ],
)
def test_every_damage_is_a_record_error(damage, reason):
    data = damage(tfrecord.frame([b"hello world"]))
    with pytest.raises(tfrecord.RecordError, match=reason):
        list(tfrecord.records(io.BytesIO(data)))


def test_verify_names_the_damaged_record():
    from common import verify

    data = bytearray(tfrecord.frame([b"one", b"two", b"three"]))
    data[-6] ^= 1  # inside the third record's data
    with pytest.raises(
        verify.DamagedShardError, match=r"^s.tfrecord: record 3 is corrupt \(bad data checksum\)$"
    ):
        verify.count_records(bytes(data), "s.tfrecord")


def test_skip_passes_records_by_their_headers_and_checks_their_lengths():
    data = tfrecord.frame([b"a", b"bc", b"def", b"g"])
    stream = io.BytesIO(data)
    assert tfrecord.skip(stream, 2) == 2
    assert next(tfrecord.records(stream)) == b"def"
    assert tfrecord.skip(stream, 5) == 1  # only one was left
    broken = bytearray(data)
    broken[8] ^= 0xFF  # the first length's checksum
    with pytest.raises(tfrecord.RecordError, match="bad length checksum"):
        tfrecord.skip(io.BytesIO(bytes(broken)), 1)
