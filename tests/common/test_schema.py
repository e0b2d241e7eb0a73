import numpy as np
import pytest
import tensorflow as tf

from common import schema


def _tf_example(ids, mask):
    feature = {
        schema.INPUT_IDS: tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
        schema.ATTENTION_MASK: tf.train.Feature(int64_list=tf.train.Int64List(value=mask)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
        deterministic=True
    )


@pytest.mark.parametrize("high", [2, 130, 20_000, 3_000_000, 2**40])
def test_encoder_is_byte_identical_to_tf_example(high):
    rng = np.random.default_rng(high)
    ids = rng.integers(0, high, size=64).tolist()
    mask = [1] * 60 + [0] * 4
    assert schema.encode_example(ids, mask) == _tf_example(ids, mask)


def test_encode_parse_round_trip():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50_000, size=(5, 16))
    masks = (np.arange(16)[None, :] < np.array([16, 16, 10, 3, 16])[:, None]).astype(np.int64)
    serialized = [schema.encode_example(i, m) for i, m in zip(ids, masks)]
    parsed = schema.parse_batch(tf.constant(serialized), max_length=16)
    assert set(parsed) == set(schema.FEATURES)
    np.testing.assert_array_equal(parsed[schema.INPUT_IDS].numpy(), ids)
    np.testing.assert_array_equal(parsed[schema.ATTENTION_MASK].numpy(), masks)
    assert parsed[schema.INPUT_IDS].dtype == tf.int64


def test_parse_rejects_wrong_length():
    serialized = [schema.encode_example([1, 2, 3], [1, 1, 1])]
    with pytest.raises(tf.errors.InvalidArgumentError):
        schema.parse_batch(tf.constant(serialized), max_length=4)


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="attention_mask"):
        schema.encode_example([1, 2, 3], [1, 1])


def test_batch_encoder_matches_tf_example_row_by_row():
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 300_000, size=(20, 33))
    ids[3, :5] = [0, 127, 128, 16383, 16384]  # varint byte-length boundaries
    masks = (rng.random((20, 33)) < 0.9).astype(np.int64)
    encoded = schema.encode_examples(ids, masks)
    assert encoded == [_tf_example(i.tolist(), m.tolist()) for i, m in zip(ids, masks)]


def test_decoder_reads_what_tensorflow_parses_on_both_paths():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 3_000_000, size=(6, 16))
    ids[0, 0] = -1  # a ten-byte varint
    masks = (np.arange(16)[None, :] < rng.integers(1, 17, (6, 1))).astype(np.int64)
    canonical = schema.encode_examples(ids, masks)
    assert schema._decode_canonical(canonical, 16) is not None  # the vectorised path
    # Another writer's field order (ids first) is the same Example: protobuf's parser reads it.
    other = [
        schema._length_delimited(
            1,
            schema._feature_entry(b"input_ids", r[-1])
            + schema._feature_entry(b"attention_mask", r[0]),
        )
        for r in zip(schema._packed_rows(masks), schema._packed_rows(ids))
    ]
    assert schema._decode_canonical(other, 16) is None
    parsed = schema.parse_batch(tf.constant(canonical + other), max_length=16)
    decoded = schema.decode_examples(canonical + other, 16)
    np.testing.assert_array_equal(decoded[0], parsed[schema.INPUT_IDS].numpy())
    np.testing.assert_array_equal(decoded[1], parsed[schema.ATTENTION_MASK].numpy())


@pytest.mark.parametrize(
    "record, message",
    [
        (b"\x0a\x05garbage", "is not a tf.train.Example"),
        (schema.encode_example([1, 2, 3], [1, 1, 1]), "has 3 input_ids, not 4"),
        (b"", "has no int64 feature 'input_ids'"),
    ],
)
def test_decoder_names_the_record_it_cannot_read(record, message):
    good = schema.encode_example([1, 2, 3, 4], [1, 1, 1, 0])
    with pytest.raises(schema.RecordSchemaError, match=message) as caught:
        schema.decode_examples([good, record], 4)
    assert caught.value.index == 1
