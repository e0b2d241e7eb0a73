"""The record schema: one fixed-length `tf.train.Example` per training sequence.

Both halves import these names; nothing else in the repository spells them out.
The pipeline encodes records without TensorFlow (Dataflow workers do not install it,
see README); the trainer parses them with `tf.io.parse_example` after batching.
"""

from __future__ import annotations

import numpy as np

INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
FEATURES = (INPUT_IDS, ATTENTION_MASK)  # both int64, both exactly `max_length` long


def feature_spec(max_length: int) -> dict:
    """The parse spec for `tf.io.parse_example` (imports TensorFlow lazily)."""
    import tensorflow as tf

    return {name: tf.io.FixedLenFeature([max_length], tf.int64) for name in FEATURES}


def parse_batch(serialized, max_length: int) -> dict:
    """Parses a batch of serialized Examples into `{name: int64[batch, max_length]}`."""
    import tensorflow as tf

    return tf.io.parse_example(serialized, feature_spec(max_length))


# --- Encoder -----------------------------------------------------------------------------
# A hand-written protobuf encoder for this one message shape, because the only library
# that ships the Example proto is TensorFlow (~600 MB) and the workers need nothing else
# from it. tests/common/test_schema.py checks it byte for byte against tf.train.Example.


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _packed_varints(values: np.ndarray) -> bytes:
    """Packed varint encoding of non-negative int64s, vectorised for values < 2**28."""
    values = np.asarray(values, dtype=np.int64)
    if values.size and (values.min() < 0 or values.max() >= 1 << 28):
        return b"".join(_varint(int(v) if v >= 0 else int(v) + (1 << 64)) for v in values)
    nbytes = 1 + (values >= 1 << 7) + (values >= 1 << 14) + (values >= 1 << 21)
    groups = np.stack([(values >> (7 * k)) & 0x7F for k in range(4)], axis=1)
    continuation = np.arange(4)[None, :] < (nbytes[:, None] - 1)
    groups = groups | (continuation * 0x80)
    keep = np.arange(4)[None, :] < nbytes[:, None]
    return groups[keep].astype(np.uint8).tobytes()


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    return _varint((field_number << 3) | 2) + _varint(len(payload)) + payload


def _int64_feature_entry(name: str, values: np.ndarray) -> bytes:
    int64_list = _length_delimited(1, _packed_varints(values))  # Int64List.value (packed)
    feature = _length_delimited(3, int64_list)  # Feature.int64_list
    entry = _length_delimited(1, name.encode()) + _length_delimited(2, feature)
    return _length_delimited(1, entry)  # Features.feature map entry


def encode_example(input_ids, attention_mask) -> bytes:
    """Serializes one record; equal to `tf.train.Example(...).SerializeToString()`."""
    if len(input_ids) != len(attention_mask):
        raise ValueError(
            f"input_ids has {len(input_ids)} ids but attention_mask has {len(attention_mask)}"
        )
    features = _int64_feature_entry(INPUT_IDS, input_ids) + _int64_feature_entry(
        ATTENTION_MASK, attention_mask
    )
    return _length_delimited(1, features)  # Example.features
