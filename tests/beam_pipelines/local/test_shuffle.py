"""The local runs' shuffle on disk and two-pass exact dedup (local_dedup.py): shards are key
ranges, a run's
slices are what a filter on the keys gives, and a whole prepare through files writes the
same bytes, counts and samples as the GroupByKey path Dataflow takes; the spill folder is
gone after a run, a crashed one included."""

import glob
import json
import os
import tempfile

import numpy as np
import pytest

from beam_pipelines import prepare, shard_writer
from beam_pipelines.local import exact_dedup as local_dedup
from beam_pipelines.local import shuffle as local_shuffle
from common import manifest
from tests.beam_pipelines.test_dedup import _args, planted_corpus
from tests.beam_pipelines.test_prepare import _shard_bytes, run_prepare


def _keys(n=20_000, seed=0):
    keys = np.random.default_rng(seed).integers(0, 2**64, size=n, dtype=np.uint64)
    return np.concatenate([keys, np.array([0, 2**32 - 1, 2**32, 2**64 - 1], np.uint64)])


@pytest.mark.parametrize("n", [1, 2, 3, 7, 1000])
def test_shards_are_contiguous_key_ranges_that_cover_every_key(n):
    keys = _keys()
    shards = shard_writer.shard_of(keys, n)
    assert shards.min() >= 0 and shards.max() < n
    for shard in sorted({0, n // 2, n - 1}):
        low, high = shard_writer.key_range(shard, n)
        inside = (keys >= np.uint64(low)) & ((keys < np.uint64(high)) if high < 2**64
                                             else True)
        assert np.array_equal(inside, shards == shard)
    assert shard_writer.key_range(0, n)[0] == 0 and shard_writer.key_range(n - 1, n)[1] == 2**64
    if n > 2:  # equal ranges: each shard gets ~1/n of uniform keys
        counts = np.bincount(shards.astype(np.int64), minlength=n)
        assert counts.max() < 1.5 * len(keys) / n + 30


def test_a_run_slice_is_the_rows_of_its_key_range(tmp_path):
    keys = _keys(5000)
    ids = np.arange(len(keys) * 4, dtype=np.uint16).reshape(-1, 4)
    lengths = np.full(len(keys), 4, np.int32)
    path = local_shuffle.save_run(str(tmp_path), "train", keys, ids, lengths)
    n, rows = 3, []
    for shard in range(n):
        k, i, l = local_shuffle.load_slice(path, *shard_writer.key_range(shard, n))
        assert np.all(shard_writer.shard_of(k, n) == shard) and np.all(np.diff(k) >= 0)
        rows.extend(zip(k.tolist(), map(tuple, i.tolist()), l.tolist()))
    assert sorted(rows) == sorted(zip(keys.tolist(), map(tuple, ids.tolist()), lengths.tolist()))


def _outputs(out):
    splits = ("train", "validation")
    samples = sorted(line for path in glob.glob(str(out / "dead_letter" / "*removed*"))
                     for line in open(path))
    return ({s: _shard_bytes(out / s) for s in splits},
            {s: manifest.read_manifest(str(out / s)).accounting for s in splits},
            [json.loads(line) for line in samples])


def test_the_disk_shuffle_writes_what_the_groupbykey_path_writes(tmp_path, corpus_texts,
                                                                 bpe_tokenizer_dir,
                                                                 monkeypatch):
    """The same corpus (planted copies, degenerate documents, blanks) through both paths on
    the local runner: byte-identical shards, the same accounting and removed samples."""
    paths, *_ = planted_corpus(tmp_path, corpus_texts)
    spill_root = tmp_path / "tmp"
    spill_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))
    monkeypatch.setattr(local_shuffle, "RUN_BYTES", 2_000)  # many small sorted runs
    monkeypatch.setattr(local_dedup, "RUN_RECORDS", 7)  # and of the dedup's keys
    monkeypatch.setattr(local_dedup, "RANGE_RECORDS", 10)
    run_prepare(*_args(paths, bpe_tokenizer_dir, tmp_path / "disk", "--num_shards", 3))
    assert os.listdir(spill_root) == []  # the spill folder went with the run

    original = prepare.build

    def beam_shuffle(*args, execution=None, **kwargs):  # what Dataflow runs
        return original(*args, **kwargs)

    monkeypatch.setattr(prepare, "build", beam_shuffle)
    run_prepare(*_args(paths, bpe_tokenizer_dir, tmp_path / "beam", "--num_shards", 3))
    disk, beam = _outputs(tmp_path / "disk"), _outputs(tmp_path / "beam")
    assert all(len(files) == 3 for files in disk[0].values())
    assert disk[0] == beam[0]
    assert disk[1] == beam[1]
    assert disk[2] == beam[2] and any(r["rule"] == "duplicate_exact" for r in disk[2])


def test_a_crash_while_writing_shards_removes_the_spill_folder(tmp_path, corpus_texts,
                                                               bpe_tokenizer_dir, monkeypatch):
    paths, *_ = planted_corpus(tmp_path, corpus_texts)
    spill_root = tmp_path / "tmp"
    spill_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))
    seen = []

    def crash(*args, **kwargs):
        seen.extend(glob.glob(str(spill_root / "prepare-shuffle-*" / "*.npy")))
        raise RuntimeError("disk full")

    monkeypatch.setattr(shard_writer, "write_shard", crash)
    with pytest.raises(Exception, match="disk full"):
        prepare.run(["--runner=FnApiRunner",
                     *map(str, _args(paths, bpe_tokenizer_dir, tmp_path / "out"))])
    assert seen and os.listdir(spill_root) == []
    assert not (tmp_path / "out" / "train" / "manifest.json").exists()
