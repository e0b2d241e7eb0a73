"""The record schema: one fixed-length `tf.train.Example` per training sequence.

Both halves import these names; nothing else in the repository spells them out.
The pipeline encodes records without TensorFlow (Dataflow workers do not install it,
see README); the trainer parses them with `tf.io.parse_example` after batching.
"""

from __future__ import annotations

import functools

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
        groups = np.stack(
            [
                ((v >> (7 * k)) & 0x7F).astype(np.uint8) | (more[k].astype(np.uint8) << 7)
                if k < 3
                else (v >> 21).astype(np.uint8)
                for k in range(4)
            ],
            axis=-1,
        )
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
    return _feature_entry(name, b"\0" * payload_size)[: -payload_size or None]


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
            headers[key] = (
                _feature_header(mask_name, len(mask)),
                _feature_header(ids_name, len(ids)),
            )
        mask_header, ids_header = headers[key]
        features = b"".join((mask_header, mask, ids_header, ids))
        out.append(b"\x0a" + _varint(len(features)) + features)  # Example.features
    return out


def encode_example(input_ids, attention_mask) -> bytes:
    """Serializes one record; equal to
    `tf.train.Example(...).SerializeToString(deterministic=True)`."""
    if len(input_ids) != len(attention_mask):
        raise ValueError(
            f"input_ids has {len(input_ids)} ids but attention_mask has {len(attention_mask)}"
        )
    return encode_examples(np.asarray([input_ids]), np.asarray([attention_mask]))[0]


# --- Decoder -----------------------------------------------------------------------------
# `common.verify` checks every record's values without TensorFlow. The fast path decodes a
# whole batch at once: a record as this encoder writes it is a run of exactly
# `_layout(max_length)[2]` varints (tags, lengths, key bytes and values alike), each in a
# fixed place, so one vectorised varint decode finds the values, and comparing the other
# varints with the expected tags, key bytes and lengths (each length must span exactly its
# part) proves that a protobuf parser reads those values. Anything else (another writer's
# field order, a short record, garbage) goes through protobuf's own parser, ~5x slower.


class RecordSchemaError(ValueError):
    """A record that is not an Example of FEATURES with `max_length` int64s each."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index  # in the batch given to decode_examples


@functools.lru_cache(maxsize=8)
def _layout(max_length: int) -> tuple:
    """A canonical record's varints: (first mask value, first id value, varints per record,
    {index: expected value} of the tags and key bytes, [(index of a length, index of the last
    varint it spans)]). Order: Example tag, length; per feature its map entry's tag and
    length, the key's tag, length and bytes, the value's tag and length, Int64List's tag and
    length, the values."""
    fixed, spans, at = {0: 0x0A}, [(1, None)], 2
    starts = []
    for name in (ATTENTION_MASK, INPUT_IDS):  # key order, as the encoder writes them
        key = name.encode()
        fixed.update({at: 0x0A, at + 2: 0x0A, at + 3: len(key)})
        fixed.update({at + 4 + i: byte for i, byte in enumerate(key)})
        value = at + 4 + len(key)
        fixed.update({value: 0x12, value + 2: 0x1A, value + 4: 0x0A})
        first = value + 6
        last = first + max_length - 1
        spans += [(at + 1, last), (value + 1, last), (value + 3, last), (value + 5, last)]
        starts.append(first)
        at = last + 1
    spans[0] = (1, at - 1)
    return starts[0], starts[1], at, fixed, spans


def _varints(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, index of each one's last byte) of bytes that are a sequence of varints;
    None if they are not (a cut or over-long varint)."""
    if not buf.size or buf[-1] >= 0x80:
        return None
    ends = np.flatnonzero(buf < 0x80).astype(np.int32)  # int32: half the memory traffic
    starts = np.empty_like(ends)
    starts[0], starts[1:] = 0, ends[:-1] + 1
    extra = ends - starts  # bytes after each varint's first
    longest = int(extra.max()) + 1
    if longest > 10:
        return None
    wide = np.uint64 if longest > 4 else np.uint32  # 4 bytes hold 28 bits: any vocabulary
    values = (buf[starts] & 0x7F).astype(wide)
    for k in range(1, longest):  # most varints here are 1-3 bytes: a pass per byte place
        byte = buf[np.minimum(starts + k, ends)] & 0x7F  # the last byte again where shorter
        values |= np.where(extra >= k, byte, 0).astype(wide) << wide(7 * k)
    return values.astype(np.uint64), ends


def _decode_canonical(records: list, max_length: int):
    """(input_ids, attention_mask) if every record has the canonical layout, else None."""
    mask_start, ids_start, per_record, fixed, spans = _layout(max_length)
    buf = np.frombuffer(b"".join(records), np.uint8)
    decoded = _varints(buf)
    if decoded is None or len(decoded[0]) != per_record * len(records):
        return None
    values, ends = decoded
    rows = values.view(np.int64).reshape(len(records), per_record)
    ends = ends.reshape(len(records), per_record)
    if not np.array_equal(ends[:, -1], np.cumsum([len(r) for r in records]) - 1):
        return None  # a record boundary inside a varint
    places = list(fixed)
    if not (rows[:, places] == np.array([fixed[p] for p in places])).all():
        return None
    for length, last in spans:
        if not (rows[:, length] == ends[:, last] - ends[:, length]).all():
            return None
    return (
        rows[:, ids_start : ids_start + max_length],
        rows[:, mask_start : mask_start + max_length],
    )


_EXAMPLE_CLASS = []  # built once, on first use


def _example_class():
    """tf.train.Example's shape (Example > Features > map > Feature > Int64List) as a
    protobuf message class in a private pool: TensorFlow is the only package shipping it."""
    if not _EXAMPLE_CLASS:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        proto = descriptor_pb2.FileDescriptorProto(
            name="common_schema_example.proto", package="common_schema", syntax="proto3"
        )
        values = proto.message_type.add(name="Int64List")
        values.field.add(name="value", number=1, type=3, label=3).options.packed = True
        proto.message_type.add(name="Feature").field.add(
            name="int64_list", number=3, type=11, label=1, type_name=".common_schema.Int64List"
        )
        features = proto.message_type.add(name="Features")
        entry = features.nested_type.add(name="FeatureEntry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=9, label=1)
        entry.field.add(
            name="value", number=2, type=11, label=1, type_name=".common_schema.Feature"
        )
        features.field.add(
            name="feature",
            number=1,
            type=11,
            label=3,
            type_name=".common_schema.Features.FeatureEntry",
        )
        proto.message_type.add(name="Example").field.add(
            name="features", number=1, type=11, label=1, type_name=".common_schema.Features"
        )
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        _EXAMPLE_CLASS.append(
            message_factory.GetMessageClass(pool.FindMessageTypeByName("common_schema.Example"))
        )
    return _EXAMPLE_CLASS[0]


def _decode_one(record: bytes, index: int, max_length: int) -> list:
    """One record through protobuf's parser: each feature's values, as TensorFlow's
    `FixedLenFeature([max_length], tf.int64)` demands them (present, int64, that many)."""
    from google.protobuf.message import DecodeError

    example = _example_class()()
    try:
        example.ParseFromString(record)
    except DecodeError:
        raise RecordSchemaError(index, "is not a tf.train.Example") from None
    found = example.features.feature
    rows = []
    for name in FEATURES:
        if name not in found or not found[name].HasField("int64_list"):
            raise RecordSchemaError(index, f"has no int64 feature {name!r}")
        values = found[name].int64_list.value
        if len(values) != max_length:
            raise RecordSchemaError(index, f"has {len(values)} {name}, not {max_length}")
        rows.append(values)
    return rows


def example_features(record: bytes) -> dict:
    """`{name: [int, ...]}` of one serialized Example's int64 features, whatever their
    length (a legacy split's first record tells its length); `RecordSchemaError` if the
    record is not an Example."""
    from google.protobuf.message import DecodeError

    example = _example_class()()
    try:
        example.ParseFromString(record)
    except DecodeError:
        raise RecordSchemaError(0, "is not a tf.train.Example") from None
    return {
        name: list(feature.int64_list.value) for name, feature in example.features.feature.items()
    }


def decode_examples(records: list, max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, attention_mask), int64 [len(records), max_length], of serialized Examples
    as `parse_batch` would read them; `RecordSchemaError` names the first record it cannot."""
    if not records:
        empty = np.zeros((0, max_length), np.int64)
        return empty, empty.copy()
    fast = _decode_canonical(records, max_length)
    if fast is not None:
        return fast
    rows = [_decode_one(r, i, max_length) for i, r in enumerate(records)]
    return (np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64))
