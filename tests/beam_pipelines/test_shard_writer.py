"""The shard writer's bytes: TFRecord framing (common/tfrecord.py) that TensorFlow reads and
`common.verify` counts, the same whether a shard is encoded at once or in chunks."""

import tensorflow as tf

from common import tfrecord, verify


def test_framing_is_what_tensorflow_reads_and_verify_counts(tmp_path):
    records = [b"", b"a", b"x" * 70_000]
    path = tmp_path / "s.tfrecord"
    path.write_bytes(tfrecord.frame(records))
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == records
    assert verify.count_records(path.read_bytes(), str(path)) == 3


def test_a_shard_streamed_in_chunks_is_the_shard_written_at_once(tmp_path):
    """WriteShard encodes a few thousand rows at a time; the file, its size and crc32c must
    be exactly those of encoding the whole sorted shard in one go."""
    import google_crc32c
    import numpy as np

    from beam_pipelines.shard_writer import WriteShard, encode_rows, framed_chunks
    from common import shards

    rng = np.random.default_rng(0)
    parts = []
    for _ in range(3):  # three bundles' parts of one shard
        n = int(rng.integers(500, 900))
        ids = rng.integers(5, 3000, (n, 16)).astype(np.int32)
        parts.append(
            (
                rng.integers(0, 2**63, n, dtype=np.uint64),
                ids,
                rng.integers(1, 17, n).astype(np.int32),
            )
        )
    keys = np.concatenate([p[0] for p in parts])
    order = np.argsort(keys, kind="stable")
    ids = np.concatenate([p[1] for p in parts])[order]
    lengths = np.concatenate([p[2] for p in parts])[order]
    expected = tfrecord.frame(encode_rows(ids, lengths))

    chunks = list(
        framed_chunks(
            np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]), order, 300
        )
    )
    assert len(chunks) == -(-len(order) // 300) and b"".join(chunks) == expected

    writer = WriteShard(str(tmp_path), "r1")
    writer.setup()
    (record,) = writer.process((("train", 0), parts))
    written = (tmp_path / "train" / record["name"]).read_bytes()
    assert written == expected
    assert record["num_bytes"] == len(expected) and record["num_examples"] == len(order)
    assert record["crc32c"] == f"{google_crc32c.value(expected):08x}"
    assert record["name"] == shards.shard_name("train", 0, len(order), "r1")
