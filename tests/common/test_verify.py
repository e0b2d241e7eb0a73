"""`python -m common.verify` parses every record against the manifest: a split whose shards
lie (about their values, their lengths, their token counts, or the manifest's own entries)
is refused naming what is wrong, even when every checksum was recomputed to match."""

import dataclasses

import google_crc32c
import numpy as np
import pytest

from common import fs, manifest, schema, shards, tfrecord, verify

VOCAB, LENGTH = 100, 16


def _rows(num, seed, length=LENGTH):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB, (num, length))
    mask = (np.arange(length)[None, :] < rng.integers(3, length + 1, (num, 1))).astype(np.int64)
    return ids * mask, mask


def _shard(split_dir, index, ids, mask) -> manifest.Shard:
    """A shard file and its honest entry (checksum and size of what was written)."""
    data = tfrecord.frame(schema.encode_examples(ids, mask))
    name = shards.shard_name("train", index, len(ids), "r1")
    fs.write_bytes(fs.join(split_dir, name), data)
    return manifest.Shard(
        name, len(ids), int(mask.sum()), len(data), f"{google_crc32c.value(data):08x}"
    )


def _commit(split_dir, entries, max_length=LENGTH, **changes):
    found = manifest.Manifest(
        split="train",
        max_length=max_length,
        num_examples=sum(s.num_examples for s in entries),
        num_tokens=sum(s.num_tokens for s in entries),
        shards=entries,
        tokenizer={"fingerprint": "ab" * 32, "vocab_size": VOCAB, "special_token_ids": {}},
        pipeline_args={},
        accounting={},
        run_id="r1",
    )
    manifest.write_manifest(split_dir, dataclasses.replace(found, **changes))


def _verify(split_dir, capsys) -> tuple[int, str]:
    code = verify.main([split_dir])
    return code, capsys.readouterr().err


@pytest.fixture(params=["local", "gcs"])
def split(request, tmp_path):
    """Two honest shards of a train split, on the local disk and in a gs:// bucket (the
    offline emulator): every lie below is caught on both."""
    if request.param == "local":
        split_dir = str(tmp_path / "train")
    else:
        gcs = request.getfixturevalue("gcs")
        gcs.apply_env()
        split_dir = gcs.url("prepared/train")
    return split_dir, [_shard(split_dir, 0, *_rows(40, 0)), _shard(split_dir, 1, *_rows(30, 1))]


def test_an_honest_split_passes(split, capsys):
    _commit(*split)
    assert verify.main([split[0]]) == 0
    assert "70 records" in capsys.readouterr().out


def test_token_ids_beyond_the_vocabulary_with_a_recomputed_checksum_are_refused(split, capsys):
    split_dir, entries = split
    ids, mask = _rows(30, 1)
    ids[7, 2] = VOCAB + 3
    entries[1] = _shard(split_dir, 1, ids, mask)  # checksum and size of the lie
    _commit(split_dir, entries)
    code, err = _verify(split_dir, capsys)
    assert code == 1 and entries[1].name in err and "record 8 " in err
    assert f"(vocabulary {VOCAB})" in err


def test_records_shorter_than_the_manifest_length_are_refused(split, capsys):
    split_dir, entries = split
    entries[0] = _shard(split_dir, 0, *_rows(40, 0, length=LENGTH - 4))
    _commit(split_dir, entries)
    code, err = _verify(split_dir, capsys)
    assert code == 1 and entries[0].name in err
    assert f"record 1 has {LENGTH - 4} input_ids, not {LENGTH}" in err


def test_doubled_token_counts_are_refused(split, capsys):
    split_dir, entries = split
    entries[1] = dataclasses.replace(entries[1], num_tokens=2 * entries[1].num_tokens)
    _commit(split_dir, entries)  # the total adds up: only the records can tell
    code, err = _verify(split_dir, capsys)
    assert code == 1 and entries[1].name in err and "tokens, the manifest says" in err
    _commit(split_dir, split[1], num_tokens=2 * sum(s.num_tokens for s in split[1]))
    code, err = _verify(split_dir, capsys)
    assert code == 1 and "shards hold" in err and "tokens but the manifest says" in err


def test_a_shard_listed_twice_is_refused(split, capsys):
    split_dir, entries = split
    _commit(split_dir, entries + [entries[0]])
    code, err = _verify(split_dir, capsys)
    assert code == 1 and f"lists {entries[0].name} more than once" in err


def test_a_format_2_entry_without_its_checksum_is_refused(split, capsys):
    split_dir, entries = split
    entries[1] = dataclasses.replace(entries[1], crc32c="")
    _commit(split_dir, entries)
    code, err = _verify(split_dir, capsys)
    assert code == 1 and f"the entry of {entries[1].name} has no crc32c" in err


def test_attention_masks_other_than_zero_and_one_are_refused(split, capsys):
    split_dir, entries = split
    ids, mask = _rows(40, 0)
    mask[3, 0] = 2
    entries[0] = _shard(split_dir, 0, ids, mask)
    _commit(split_dir, entries)
    code, err = _verify(split_dir, capsys)
    assert code == 1 and "record 4 " in err and "[0, 1, 2]" in err
