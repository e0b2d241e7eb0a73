import pytest

from common import fs, manifest


def _write_split(split_dir, counts=(3, 2), max_length=16, fingerprint="ab" * 32):
    entries = []
    for i, n in enumerate(counts):
        name = f"train-{i:05d}-{n}.tfrecord"
        fs.write_bytes(fs.join(split_dir, name), b"")
        entries.append(manifest.Shard(name, n, n * max_length))
    m = manifest.Manifest(
        split="train", max_length=max_length, num_examples=sum(counts),
        num_tokens=sum(counts) * max_length, shards=entries,
        tokenizer={"fingerprint": fingerprint, "vocab_size": 100, "special_token_ids": {}},
        pipeline_args={"input": "x"}, accounting={"split": {}, "run": {}})
    digest = manifest.write_manifest(split_dir, m)
    manifest.write_marker(split_dir, digest)
    return m


def test_write_then_read_validates(tmp_path):
    written = _write_split(str(tmp_path))
    read = manifest.read_manifest(str(tmp_path), max_length=16, tokenizer_fingerprint="ab" * 32,
                                  vocab_size=100)
    assert read == written
    assert read.shard_paths(str(tmp_path))[0].endswith("train-00000-3.tfrecord")


def test_missing_marker_means_incomplete(tmp_path):
    _write_split(str(tmp_path))
    manifest.remove_marker(str(tmp_path))
    with pytest.raises(manifest.ManifestError, match="incomplete.*no _COMPLETE"):
        manifest.read_manifest(str(tmp_path))


def test_marker_of_another_manifest_means_incomplete(tmp_path):
    _write_split(str(tmp_path))
    (tmp_path / "manifest.json").write_text((tmp_path / "manifest.json").read_text() + " ")
    with pytest.raises(manifest.ManifestError, match="belongs to another"):
        manifest.read_manifest(str(tmp_path))


def test_sequence_length_mismatch(tmp_path):
    _write_split(str(tmp_path), max_length=16)
    with pytest.raises(manifest.ManifestError, match="length 16, but 128"):
        manifest.read_manifest(str(tmp_path), max_length=128)


def test_tokenizer_mismatch(tmp_path):
    _write_split(str(tmp_path), fingerprint="ab" * 32)
    with pytest.raises(manifest.ManifestError, match="another tokenizer"):
        manifest.read_manifest(str(tmp_path), tokenizer_fingerprint="cd" * 32)


def test_vocab_mismatch(tmp_path):
    _write_split(str(tmp_path))
    with pytest.raises(manifest.ManifestError, match="vocabulary size 100"):
        manifest.read_manifest(str(tmp_path), vocab_size=200)


def test_listed_shard_missing(tmp_path):
    _write_split(str(tmp_path))
    (tmp_path / "train-00001-2.tfrecord").unlink()
    with pytest.raises(manifest.ManifestError, match="do not exist, first train-00001-2"):
        manifest.read_manifest(str(tmp_path))
