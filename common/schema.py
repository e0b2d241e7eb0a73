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


def _varint_slow(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = [_varint_slow(v) for v in range(1 << 14)]  # every length header of a record


def _varint(value: int) -> bytes:
    return _SMALL_VARINTS[value] if value < 16384 else _varint_slow(value)


def _packed_rows(values: np.ndarray) -> list[bytes]:
    """Packed varint encoding of each row of a non-negative int array, vectorised over the
    whole array in uint8 (a per-value Python loop cost 150 us a record)."""
    values = np.asarray(values)
    if values.size and (values.min() < 0 or values.max() >= 1 << 28):
        to_u64 = lambda v: int(v) if v >= 0 else int(v) + (1 << 64)  # noqa: E731
        return [b"".join(_varint_slow(to_u64(int(v))) for v in row) for row in values]
    n, width = values.shape
    if not values.size or values.max() < 0x80:  # one byte each (attention masks)
        flat, row_bytes = values.astype(np.uint8).tobytes(), np.full(n, width)
    else:
        v = values.astype(np.uint32)
        more = [v >= 1 << (7 * k) for k in (1, 2, 3)]  # does byte k+1 exist?
        groups = np.stack([((v >> (7 * k)) & 0x7F).astype(np.uint8)
                           | (more[k].astype(np.uint8) << 7) if k < 3
                           else (v >> 21).astype(np.uint8) for k in range(4)], axis=-1)
        nbytes = 1 + more[0].astype(np.uint8) + more[1] + more[2]
        flat = groups[np.arange(4, dtype=np.uint8) < nbytes[..., None]].tobytes()
        row_bytes = nbytes.sum(axis=1, dtype=np.int64)
    ends = np.cumsum(row_bytes).tolist()
    return [flat[a:b] for a, b in zip([0] + ends[:-1], ends)]


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    return _varint((field_number << 3) | 2) + _varint(len(payload)) + payload


def _feature_entry(name: bytes, packed: bytes) -> bytes:
    int64_list = _length_delimited(1, packed)  # Int64List.value (packed)
    feature = _length_delimited(3, int64_list)  # Feature.int64_list
    entry = _length_delimited(1, name) + _length_delimited(2, feature)
    return _length_delimited(1, entry)  # one Features.feature map entry


def _feature_header(name: bytes, payload_size: int) -> bytes:
    """Everything of a map entry that precedes its packed payload; it depends only on the
    payload's size, so encode_examples caches it (nested length prefixes, no Python loop)."""
    return _feature_entry(name, b"\0" * payload_size)[:-payload_size or None]


def encode_examples(input_ids: np.ndarray, attention_mask: np.ndarray) -> list[bytes]:
    """Serializes rows [n, max_length]; each equals TF's deterministic serialization."""
    input_ids, attention_mask = np.asarray(input_ids), np.asarray(attention_mask)
    if input_ids.shape != attention_mask.shape:
        raise ValueError(
            f"input_ids has shape {input_ids.shape} but attention_mask has {attention_mask.shape}"
        )
    # Map entries in key order, as protobuf's deterministic serialization writes them.
    mask_name, ids_name = ATTENTION_MASK.encode(), INPUT_IDS.encode()
    headers: dict = {}
    out = []
    for ids, mask in zip(_packed_rows(input_ids), _packed_rows(attention_mask)):
        key = (len(mask), len(ids))
        if key not in headers:
            headers[key] = (_feature_header(mask_name, len(mask)),
                            _feature_header(ids_name, len(ids)))
        mask_header, ids_header = headers[key]
        features = b"".join((mask_header, mask, ids_header, ids))
        out.append(b"\x0a" + _varint(len(features)) + features)  # Example.features
    return out


def encode_example(input_ids, attention_mask) -> bytes:
    """Serializes one record; equal to `tf.train.Example(...).SerializeToString(deterministic=True)`."""
    if len(input_ids) != len(attention_mask):
        raise ValueError(
            f"input_ids has {len(input_ids)} ids but attention_mask has {len(attention_mask)}"
        )
    return encode_examples(np.asarray([input_ids]), np.asarray([attention_mask]))[0]
