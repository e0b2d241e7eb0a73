"""--init_from's safetensors reading (trainer/models/safetensors_files.py): a damaged file is one
line naming it and what is wrong, checked before any tensor is read; a checkpoint sharded by
transformers' `save_pretrained(max_shard_size=...)` loads with the logits of the one-file
checkpoint. Tiny models written offline (transformers + torch on CPU), ~1 s each."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

from common.errors import UserError
from tests.trainer.models.test_init_from import TOLERANCE, hf_checkpoint, loaded, logits
from trainer.models import init_from, safetensors_files

pytest.importorskip("torch")


def _header_length(data: bytes) -> int:
    return struct.unpack("<Q", data[:8])[0]


def _overlong_entry(data: bytes) -> bytes:
    """The first tensor's shape grown by one row, its offsets kept: the header lies."""
    length = _header_length(data)
    header = json.loads(data[8 : 8 + length])
    name = next(n for n in header if n != "__metadata__")
    header[name]["shape"][0] += 1
    raw = json.dumps(header, separators=(",", ":")).encode().ljust(length)
    return data[:8] + raw[:length] + data[8 + length :] if len(raw) == length else data


DAMAGE = {
    "truncated": (lambda d: d[: len(d) // 2], "past the file's end"),
    "zeroed": (lambda d: bytes(len(d)), "its header is not JSON"),
    "absurd header length": (
        lambda d: struct.pack("<Q", 2**62) + d[8:],
        "its header length field says 4611686018427387904 bytes",
    ),
    "five bytes": (lambda d: d[:5], "is 5 bytes: too short"),
    "shape and offsets disagree": (_overlong_entry, "not the"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_safetensors_file_is_one_line_naming_it(tmp_path, damage):
    hf_checkpoint(tmp_path, "roberta")
    weights = tmp_path / "model.safetensors"
    change, message = DAMAGE[damage]
    original = weights.read_bytes()
    weights.write_bytes(change(original))
    assert weights.read_bytes() != original
    with pytest.raises(UserError) as caught:
        loaded(tmp_path)
    text = str(caught.value)
    assert str(weights) in text and message in text and len(text.splitlines()) == 1, text


def test_a_sharded_checkpoint_loads_with_the_logits_of_one_file(tmp_path):
    hf = hf_checkpoint(tmp_path / "one", "roberta")
    hf.save_pretrained(str(tmp_path / "sharded"), max_shard_size="30KB")
    names = sorted(os.listdir(tmp_path / "sharded"))
    shards = [n for n in names if n.startswith("model-")]
    assert safetensors_files.INDEX in names and "model.safetensors" not in names
    assert len(shards) >= 3
    initial, masked_lm = loaded(tmp_path / "sharded")
    ours, theirs = logits(masked_lm, hf, "roberta", pad_id=1)
    assert np.abs(ours - theirs).max() <= TOLERANCE
    _, whole = loaded(tmp_path / "one")
    for a, b in zip(masked_lm.weights, whole.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert initial.digest != init_from.resolve(str(tmp_path / "one")).digest  # other files
    os.remove(tmp_path / "sharded" / shards[-1])
    with pytest.raises(UserError, match=f"names the shard {shards[-1]}, which is not in"):
        init_from.resolve(str(tmp_path / "sharded"))
