"""The local runs' shuffle on disk and two-pass exact dedup (local_dedup.py): shards are key
ranges, a run's
slices are what a filter on the keys gives, and a whole prepare through files writes the
same bytes, counts and samples as the GroupByKey path Dataflow takes; the spill folder is
gone after a run, a crashed one included."""

import glob
import json
import os
import shutil
import tempfile

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

from beam_pipelines import options, prepare, shard_writer
from beam_pipelines.execution import GroupingExecution
from beam_pipelines.local import exact_dedup as local_dedup
from beam_pipelines.local import shuffle as local_shuffle
from beam_pipelines.local.execution import OnDiskExecution
from common import manifest, shards
from tests.beam_pipelines.test_dedup import _args, planted_corpus
from tests.beam_pipelines.test_prepare import _shard_bytes, run_prepare, write_jsonl


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
        inside = (keys >= np.uint64(low)) & ((keys < np.uint64(high)) if high < 2**64 else True)
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
        k, i, slice_lengths = local_shuffle.load_slice(path, *shard_writer.key_range(shard, n))
        assert np.all(shard_writer.shard_of(k, n) == shard) and np.all(np.diff(k) >= 0)
        rows.extend(zip(k.tolist(), map(tuple, i.tolist()), slice_lengths.tolist()))
    assert sorted(rows) == sorted(zip(keys.tolist(), map(tuple, ids.tolist()), lengths.tolist()))


def _outputs(out):
    """Per split: shard bytes, manifest entries (run id aside), accounting; the sample."""
    splits = sorted(
        os.path.basename(os.path.dirname(p)) for p in glob.glob(str(out / "*" / "manifest.json"))
    )
    samples = sorted(
        line for path in glob.glob(str(out / "dead_letter" / "*removed*")) for line in open(path)
    )
    entries = {
        s: [
            (shards.parse_shard_name(e.name)[1:], e.num_tokens, e.num_bytes, e.crc32c)
            for e in manifest.read_manifest(str(out / s)).shards
        ]
        for s in splits
    }
    return (
        {s: _shard_bytes(out / s) for s in splits},
        entries,
        {s: manifest.read_manifest(str(out / s)).accounting for s in splits},
        [json.loads(line) for line in samples],
    )


def _both_paths(tmp_path, monkeypatch, paths, tok, *extra):
    """One corpus through a local prepare (files on disk) and through the GroupByKey path
    that Dataflow runs, both on the local runner: (disk outputs, GroupByKey outputs)."""
    spill_root = tmp_path / "tmp"
    spill_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))
    run_prepare(*_args(paths, tok, tmp_path / "disk", *extra))
    assert os.listdir(spill_root) == []  # the spill folder went with the run
    original = prepare.build

    def beam_shuffle(*args, spill_dir=None, **kwargs):  # what Dataflow runs
        return original(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(prepare, "build", beam_shuffle)
        run_prepare(*_args(paths, tok, tmp_path / "beam", *extra))
    return _outputs(tmp_path / "disk"), _outputs(tmp_path / "beam")


def test_the_disk_shuffle_writes_what_the_groupbykey_path_writes(
    tmp_path, corpus_texts, bpe_tokenizer_dir, monkeypatch
):
    """The same corpus (planted copies, degenerate documents, blanks) through both paths on
    the local runner: byte-identical shards, the same accounting and removed samples."""
    paths, *_ = planted_corpus(tmp_path, corpus_texts)
    monkeypatch.setattr(local_shuffle, "RUN_BYTES", 2_000)  # many small sorted runs
    monkeypatch.setattr(local_dedup, "RUN_RECORDS", 7)  # and of the dedup's keys
    monkeypatch.setattr(local_dedup, "RANGE_RECORDS", 10)
    disk, beam = _both_paths(tmp_path, monkeypatch, paths, bpe_tokenizer_dir, "--num_shards", 3)
    assert all(len(files) == 3 for files in disk[0].values())
    assert disk == beam
    assert any(r["rule"] == "duplicate_exact" for r in disk[3])


def test_more_shards_than_rows_fill_the_same_shards_on_both_paths(
    tmp_path, corpus_texts, bpe_tokenizer_dir, monkeypatch
):
    """The issue's case: --num_shards 8 on a tiny corpus, where some shards' key ranges hold
    no row: both paths write the same shards, none of them empty (a host given an empty
    shard would read nothing)."""
    path = write_jsonl(tmp_path / "tiny.jsonl", corpus_texts[1:2] + corpus_texts[3:5])
    monkeypatch.setattr(local_shuffle, "RUN_BYTES", 200)  # rows in several sorted runs
    disk, beam = _both_paths(
        tmp_path,
        monkeypatch,
        [path],
        bpe_tokenizer_dir,
        "--num_shards",
        8,
        "--validation_fraction",
        0,
    )
    assert disk == beam
    entries = disk[1]["train"]
    counts = [count for (_, count), *_ in entries]
    assert all(counts) and len(entries) < min(8, sum(counts))  # no file for empty ranges


def test_quality_filtered_variants_of_copied_texts_are_not_sampled_as_copies(
    tmp_path, corpus_texts, bpe_tokenizer_dir, monkeypatch
):
    """Texts with exact copies, and variants of them that the quality filter drops but
    whose normalised text is the same (soft hyphens after every character): both paths
    count and sample them as filtered, never as duplicates."""
    texts = corpus_texts[:12]
    hyphenated = ["".join(c + "\u00ad\u00ad" for c in t) for t in texts[:4]]
    path = write_jsonl(tmp_path / "c.jsonl", texts + texts[:4] + hyphenated)
    disk, beam = _both_paths(tmp_path, monkeypatch, [path], bpe_tokenizer_dir)
    assert disk[2] == beam[2] and disk[3] == beam[3]
    copies = [r for r in disk[3] if r["rule"] == "duplicate_exact"]
    assert sorted(r["line"] for r in copies) == [13, 14, 15, 16]
    assert len(disk[3]) == 8  # and the 4 filtered ones, under their rules


def test_a_crash_while_writing_shards_removes_the_spill_folder(
    tmp_path, corpus_texts, bpe_tokenizer_dir, monkeypatch
):
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
        prepare.run(
            ["--runner=FnApiRunner", *map(str, _args(paths, bpe_tokenizer_dir, tmp_path / "out"))]
        )
    assert seen and os.listdir(spill_root) == []
    assert not (tmp_path / "out" / "train" / "manifest.json").exists()


def _shuffle_files(make_execution, blocks, out, run_id, num_shards):
    """Row blocks through one execution's shuffle: ({name: bytes}, manifest records)."""
    flags = options.PrepareFlags(
        seed=3, max_length=blocks[0][1].shape[1], output_dir=str(out), num_shards=num_shards
    )
    settings = options.Settings(flags, (), ("train",), None, None, shard_size=1000)
    with BeamTestPipeline(runner="FnApiRunner") as p:
        parts = tuple(p | f"Block{i}" >> beam.Create([block]) for i, block in enumerate(blocks))
        written, _ = make_execution(settings, run_id).shuffle(parts)
        records = (
            written
            | beam.combiners.ToList()
            | beam.Map(lambda found: sorted(found, key=lambda r: r["shard"]))
        )
        records | beam.io.WriteToText(str(out / "records"), shard_name_template="")
    files = {p.name: p.read_bytes() for p in sorted((out / "train").glob("*.tfrecord"))}
    return files, (out / "records").read_text()


def test_both_shuffles_write_the_same_shards_and_no_empty_one(tmp_path, monkeypatch):
    """The issue's case: --num_shards 8 on 7 rows (7 key ranges, some with no row): both
    paths write the same files, none empty. Also ids above 65,535 and equal keys across
    sorted runs, on identical rows and on different rows (a 64-bit key collision, forced
    here by keying rows on their first id only)."""
    rng = np.random.default_rng(1)
    rows = rng.integers(0, 100_000, (5, 6)).astype(np.int32)  # ids above 65,535
    rows[1, 0] = rows[3, 0] = rows[4, 0]  # different rows, equal keys
    blocks = [("train", rows[i : i + 1], np.array([6], np.int32)) for i in range(5)]
    blocks += [
        ("train", rows[[0]], np.array([6], np.int32)),  # an identical row, another run
        ("train", rows[[4]], np.array([6], np.int32)),
    ]
    real_keys = shard_writer.row_keys
    monkeypatch.setattr(
        shard_writer,
        "row_keys",
        lambda ids, lengths, weights: real_keys(ids[:, :1], lengths, weights),
    )
    monkeypatch.setattr(local_shuffle, "RUN_BYTES", 1)  # every block its own sorted run
    run_id = shards.new_run_id()
    (tmp_path / "spill").mkdir()

    def on_disk(settings, run_id):  # the shuffle reads no input: no reader
        return OnDiskExecution(settings, run_id, None, str(tmp_path / "spill"))

    disk = _shuffle_files(on_disk, blocks, tmp_path / "disk", run_id, 8)
    for order in (blocks, blocks[::-1]):  # the GroupByKey's order of parts is not fixed
        beam_path = _shuffle_files(
            GroupingExecution, order, tmp_path / f"beam{len(order)}", run_id, 8
        )
        shutil.rmtree(tmp_path / f"beam{len(order)}")
        assert beam_path == disk
    names = list(disk[0])
    assert 0 < len(names) < 7  # some key ranges hold no row ...
    assert all(shards.parse_shard_name(n)[2] > 0 for n in names)  # ... and wrote no file
    assert sum(shards.parse_shard_name(n)[2] for n in names) == 7
