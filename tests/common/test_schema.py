import numpy as np
import pytest
import tensorflow as tf

from common import schema


def _tf_example(ids, mask):
    feature = {
        schema.INPUT_IDS: tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
        schema.ATTENTION_MASK: tf.train.Feature(int64_list=tf.train.Int64List(value=mask)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


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
