import json

import pytest

from common import fs, manifest


def _write_split(
    split_dir,
    counts=(3, 2),
    max_length=16,
    fingerprint="ab" * 32,
    format_version=manifest.FORMAT_VERSION,
):
    entries = []
    for i, n in enumerate(counts):
        name = f"train-{i:05d}-{n}.tfrecord"
        fs.write_bytes(fs.join(split_dir, name), b"x" * n)
        entries.append(manifest.Shard(name, n, n * max_length, num_bytes=n))
    m = manifest.Manifest(
        split="train",
        max_length=max_length,
        num_examples=sum(counts),
        num_tokens=sum(counts) * max_length,
        shards=entries,
        tokenizer={"fingerprint": fingerprint, "vocab_size": 100, "special_token_ids": {}},
        pipeline_args={"input": "x"},
        accounting={"split": {}, "run": {}},
        format_version=format_version,
    )
    digest = manifest.write_manifest(split_dir, m)
    if format_version == manifest.LEGACY_MARKED_VERSION:
        manifest.write_marker(split_dir, digest)
    return m


def test_write_then_read_validates(tmp_path):
    written = _write_split(str(tmp_path))
    read = manifest.read_manifest(
        str(tmp_path), max_length=16, tokenizer_fingerprint="ab" * 32, vocab_size=100
    )
    assert read == written
    assert read.shard_paths(str(tmp_path))[0].endswith("train-00000-3.tfrecord")


def test_shards_without_a_manifest_are_incomplete(tmp_path):
    _write_split(str(tmp_path))
    (tmp_path / "manifest.json").unlink()
    with pytest.raises(manifest.ManifestError, match="incomplete.*no manifest.json"):
        manifest.read_manifest(str(tmp_path))


def test_format_1_still_needs_its_marker(tmp_path):
    written = _write_split(str(tmp_path), format_version=1)
    assert manifest.read_manifest(str(tmp_path)) == written
    (tmp_path / "manifest.json").write_text((tmp_path / "manifest.json").read_text() + " ")
    with pytest.raises(manifest.ManifestError, match="no matching _COMPLETE"):
        manifest.read_manifest(str(tmp_path))


def test_a_shard_of_another_size_is_refused(tmp_path):
    _write_split(str(tmp_path))
    (tmp_path / "train-00000-3.tfrecord").write_bytes(b"xx")  # truncated
    with pytest.raises(manifest.ManifestError, match="has 2 bytes, but manifest.json says 3"):
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


@pytest.mark.parametrize("tokenizer", [{"vocab_size": 100}, {"fingerprint": None}, None])
def test_a_manifest_without_a_tokenizer_fingerprint_is_one_clear_error(tmp_path, tokenizer):
    _write_split(str(tmp_path))
    data = fs.read_json(str(tmp_path / "manifest.json"))
    data["tokenizer"] = tokenizer
    fs.write_json(str(tmp_path / "manifest.json"), data)
    with pytest.raises(manifest.ManifestError, match="tokenizer"):
        manifest.read_manifest(str(tmp_path), tokenizer_fingerprint="ab" * 32)


@pytest.mark.parametrize(
    "path, value",
    [
        (("num_examples",), "5"),
        (("shards", 0, "num_examples"), "3"),
        (("max_length",), 16.0),
        (("shards", 1, "name"), 7),
        (("num_tokens",), True),
    ],
)
def test_a_count_of_the_wrong_type_is_an_invalid_manifest_for_readers_and_verify(
    tmp_path, capsys, path, value
):
    import json

    from common import verify

    _write_split(str(tmp_path))
    data = json.loads((tmp_path / "manifest.json").read_text())
    record = data
    for key in path[:-1]:
        record = record[key]
    record[path[-1]] = value
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(
        manifest.ManifestError, match="is not a valid manifest: .* not an? (integer|string)"
    ):
        manifest.read_manifest(str(tmp_path))
    assert manifest.try_read(str(tmp_path)) is None
    assert verify.main([str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("BAD: ") and "\n" not in err and "Traceback" not in err


def test_format_2_without_a_mixture_still_reads(tmp_path):
    """Outputs prepared before named sources (format 2: no `mixture`) stay readable."""
    _write_split(str(tmp_path), format_version=2)
    path = tmp_path / "manifest.json"
    data = json.loads(path.read_text())
    del data["mixture"], data["decontamination"], data["quality_model"]
    path.write_text(json.dumps(data))
    read = manifest.read_manifest(str(tmp_path))
    assert read.format_version == 2 and read.mixture == {} and read.decontamination == {}


def test_format_3_without_decontamination_still_reads(tmp_path):
    """Outputs prepared before --decontaminate (format 3: no `decontamination`) stay readable."""
    _write_split(str(tmp_path), format_version=3)
    path = tmp_path / "manifest.json"
    data = json.loads(path.read_text())
    del data["decontamination"], data["quality_model"]
    path.write_text(json.dumps(data))
    read = manifest.read_manifest(str(tmp_path))
    assert read.format_version == 3 and read.decontamination == {}


def test_format_4_without_a_quality_model_still_reads(tmp_path):
    """Outputs prepared before --quality_model (format 4: no `quality_model`) stay readable."""
    _write_split(str(tmp_path), format_version=4)
    path = tmp_path / "manifest.json"
    data = json.loads(path.read_text())
    del data["quality_model"]
    path.write_text(json.dumps(data))
    read = manifest.read_manifest(str(tmp_path))
    assert read.format_version == 4 and read.quality_model == {}


def test_an_unknown_format_is_refused(tmp_path):
    _write_split(str(tmp_path), format_version=manifest.FORMAT_VERSION + 1)
    with pytest.raises(manifest.ManifestError, match="format version 6; this code reads"):
        manifest.read_manifest(str(tmp_path))
