"""The prepare pipeline, run for real on Beam's FnApiRunner, shards read back with tf.data."""

import glob
import json
import os

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from tokenizers import Tokenizer

from beam_pipelines import accounting, prepare, shard_writer, sources, tokenization
from common import manifest, schema, shards, splits


def run_prepare(*args):
    code = prepare.run(["--runner=FnApiRunner", *map(str, args)])
    assert code == 0


def read_split(split_dir, max_length):
    """All records of a split, shard by shard: {shard_name: (ids, masks)}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(split_dir, "*.tfrecord"))):
        batches = (
            tf.data.TFRecordDataset(path)
            .batch(10_000)
            .map(lambda s: schema.parse_batch(s, max_length))
        )
        ids = [b[schema.INPUT_IDS].numpy() for b in batches]
        masks = [b[schema.ATTENTION_MASK].numpy() for b in batches]
        out[os.path.basename(path)] = (
            np.concatenate(ids) if ids else np.zeros((0, max_length)),
            np.concatenate(masks) if masks else None,
        )
    return out


def write_jsonl(path, texts):
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    return path


def encode_all(tok_dir, texts):
    tokenizer = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    return [e.ids for e in tokenizer.encode_batch(texts)]


def test_shards_manifest_and_exact_token_accounting(tmp_path, corpus_texts, bpe_tokenizer_dir):
    inputs = [write_jsonl(tmp_path / f"part{i}.jsonl", corpus_texts[i::3]) for i in range(3)]
    out = tmp_path / "out"
    run_prepare(
        "--input",
        ",".join(map(str, inputs)),
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--max_length",
        64,
        "--validation_fraction",
        0.1,
        "--num_shards",
        3,
    )
    encoded = encode_all(bpe_tokenizer_dir, corpus_texts)
    expected_tokens, dropped = np.zeros(1000, np.int64), 0
    for ids in encoded:
        np.add.at(expected_tokens, ids, 1)
    written = np.zeros(1000, np.int64)
    for split in ("train", "validation"):
        m = manifest.read_manifest(str(out / split), max_length=64)
        records = read_split(str(out / split), 64)
        assert [s.name for s in m.shards] == sorted(records)
        for shard in m.shards:  # the count in the name, the manifest and the file agree
            ids, masks = records[shard.name]
            assert len(ids) == shard.num_examples == shards.count_from_name(shard.name)
            assert int(masks.sum()) == shard.num_tokens
            np.add.at(written, ids[masks == 1], 1)
        assert m.num_examples == sum(len(r[0]) for r in records.values())
        acc = m.accounting["split"]
        assert acc["tokens_in"] == acc["tokens_written"] + acc["tokens_dropped"]
        assert acc["tokens_dropped"] < 64  # only the split's final partial row
        dropped += acc["tokens_dropped"]
    # Every token of the input is written exactly once, except the dropped ones.
    missing = expected_tokens - written
    assert (missing >= 0).all() and missing.sum() == dropped
    run = m.accounting["run"]
    assert run["documents_read"] == len(corpus_texts) == run["documents_tokenized"]
    # The record of the run: every prepare flag (defaults too), the package version.
    args = m.pipeline_args
    assert args["tokenizer"] == bpe_tokenizer_dir and args["tokenize_batch_chars"] == 1_000_000
    assert args["num_shards"] == 3 and args["seed"] == 0 and args["_version"] == "0.1.0"


def test_rows_are_contiguous_pieces_of_documents(tmp_path, corpus_texts, bpe_tokenizer_dir):
    """Inside a row, tokens between document boundaries are an in-order slice of one doc."""
    texts = corpus_texts[:150]
    out = tmp_path / "out"
    run_prepare(
        "--input",
        write_jsonl(tmp_path / "c.jsonl", texts),
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--max_length",
        32,
        "--pad_tail",
    )
    docs = [",".join(map(str, ids)) + "," for ids in encode_all(bpe_tokenizer_dir, texts)]
    haystack = "|" + "|".join(docs)
    sep = 2  # </s> ends every document
    for ids, masks in read_split(str(out / "train"), 32).values():
        for row, mask in zip(ids, masks):
            tokens = row[mask == 1].tolist()
            pieces, piece = [], []
            for t in tokens:
                piece.append(t)
                if t == sep:
                    pieces.append(piece)
                    piece = []
            pieces.append(piece)
            for piece in filter(None, pieces):
                assert ",".join(map(str, piece)) + "," in haystack


def test_sequences_of_one_document_are_scattered(tmp_path, corpus_texts, bpe_tokenizer_dir):
    long_docs = [" ".join(corpus_texts[i : i + 40]) for i in range(0, 400, 40)]
    out = tmp_path / "out"
    run_prepare(
        "--input",
        write_jsonl(tmp_path / "c.jsonl", long_docs),
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--max_length",
        32,
        "--num_shards",
        4,
    )
    stream = ",".join(str(t) for ids in encode_all(bpe_tokenizer_dir, long_docs) for t in ids)
    records = read_split(str(out / "train"), 32)
    assert len(records) == 4
    adjacent = continued = 0
    for ids, _ in records.values():
        assert len(ids) > 100
        for a, b in zip(ids[:-1], ids[1:]):
            adjacent += 1
            continued += ",".join(map(str, np.concatenate([a[-4:], b[:4]]))) in stream
    # Unshuffled, nearly every neighbour would continue its predecessor's document.
    assert continued / adjacent < 0.05, (continued, adjacent)


def test_pad_tail_keeps_every_token(tmp_path, corpus_texts, bpe_tokenizer_dir):
    out = tmp_path / "out"
    run_prepare(
        "--input",
        write_jsonl(tmp_path / "c.jsonl", corpus_texts[:50]),
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--max_length",
        64,
        "--pad_tail",
    )
    m = manifest.read_manifest(str(out / "train"))
    assert m.accounting["split"]["tokens_dropped"] == 0
    assert m.accounting["split"]["tokens_padded"] > 0
    ((ids, masks),) = read_split(str(out / "train"), 64).values()
    padded = masks.sum(axis=1) < 64
    assert padded.sum() == 1
    assert (ids[padded][masks[padded] == 0] == 1).all()  # the pad id of the tokenizer


def test_bad_input_is_dead_lettered_and_accounted(tmp_path, corpus_texts, bpe_tokenizer_dir):
    good = write_jsonl(tmp_path / "good.jsonl", corpus_texts[:40])
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(
        b'{"text": "ok document"}\n{"text": "caf\xe9"}\n{oops\n{"title": "x"}\n'
        b'{"text": 42}\n{"text": ""}\n[1, 2]\n'
    )
    (tmp_path / "empty.jsonl").write_bytes(b"")
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.write(b"short line one\n")
        f.write(b"word " * 10_000_000 + b"\n")  # one 50 MB document
        f.write(b"short line three\n")
    out = tmp_path / "out"
    run_prepare(
        "--input",
        f"{good},{bad},{tmp_path}/empty.jsonl,{huge}",
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--max_length",
        32,
        "--max_rejected_fraction",
        0.5,
    )  # 6 of 50 rejected: over the default 0.1
    dead = [
        json.loads(line)
        for path in glob.glob(str(out / "dead_letter" / "*-dead_letter*"))
        for line in open(path)
    ]
    reasons = {(os.path.basename(d["source"]), d["line"]): d["reason"] for d in dead}
    assert reasons[("bad.jsonl", 2)].startswith("invalid UTF-8")
    assert reasons[("bad.jsonl", 3)].startswith("malformed JSON")
    assert reasons[("bad.jsonl", 4)] == "missing field 'text'"
    assert reasons[("bad.jsonl", 5)] == "field 'text' is int, not a string"
    assert reasons[("bad.jsonl", 7)] == "JSON line is a list, not an object"
    assert "50000000 bytes is over the limit" in reasons[("huge.txt", 2)]
    assert len(dead) == 6
    run = manifest.read_manifest(str(out / "train")).accounting["run"]
    assert run["documents_read"] == 40 + 7 + 3
    assert run["documents_rejected"] == 6 and run["documents_empty"] == 1
    # "ok document", "short line one", "short line three": under --min_words
    assert run["filtered_by_rule"] == {"min_words": 3}
    assert run["documents_read"] == (
        run["documents_tokenized"]
        + run["documents_empty"]
        + run["documents_rejected"]
        + run["documents_filtered"]
        + run["documents_duplicate"]
    )


@pytest.mark.slow
def test_rerun_replaces_output_and_is_deterministic(tmp_path, corpus_texts, bpe_tokenizer_dir):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:120])
    out = tmp_path / "out"
    common = [
        "--input",
        src,
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--max_length",
        32,
    ]
    run_prepare(*common, "--num_shards", 3)
    first = _shard_bytes(out / "train")
    run_prepare(*common, "--num_shards", 2)
    assert len(glob.glob(str(out / "train" / "*.tfrecord"))) == 2
    assert len(manifest.read_manifest(str(out / "train")).shards) == 2
    run_prepare(*common, "--num_shards", 3, "--test_fraction", 0.2)
    assert manifest.read_manifest(str(out / "test")).num_examples > 0
    run_prepare(*common, "--num_shards", 3)
    assert not glob.glob(str(out / "test" / "*"))  # a split this run does not write is removed
    assert _shard_bytes(out / "train") == first  # same data + seed -> byte-identical shards
    assert sorted(os.listdir(out)) == ["_runs", "dead_letter", "train"]  # no temp files
    listed = [s.name for s in manifest.read_manifest(str(out / "train")).shards]
    assert sorted(os.listdir(out / "train")) == sorted(listed + ["manifest.json"])


def _shard_bytes(split_dir):
    """Shard contents by index (names carry the run id, so reruns have other names)."""
    found = {
        shards.parse_shard_name(p)[1]: open(p, "rb").read()
        for p in glob.glob(str(split_dir / "*.tfrecord"))
    }
    return [found[i] for i in sorted(found)]


@pytest.mark.slow
def test_crashed_rerun_leaves_the_previous_output_readable(
    tmp_path, corpus_texts, bpe_tokenizer_dir, monkeypatch
):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:60])
    out = tmp_path / "out"
    args = [
        "--input",
        src,
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--max_length",
        32,
    ]
    run_prepare(*args)
    before = manifest.read_manifest(str(out / "train"))

    def crash(*args, **kwargs):
        raise RuntimeError("worker lost")

    with monkeypatch.context() as patched:
        patched.setattr(shard_writer, "write_shard", crash)
        with pytest.raises(Exception, match="worker lost"):
            prepare.run(["--runner=FnApiRunner", *map(str, args)])
    assert manifest.read_manifest(str(out / "train")) == before  # untouched, still valid
    assert not (out / "_LOCK").exists()  # a dead local run releases the lock
    run_prepare(*args)
    assert manifest.read_manifest(str(out / "train")).run_id != before.run_id


def test_split_assignment_is_deterministic_in_a_pipeline(corpus_texts):
    texts = corpus_texts[:200]
    expected = [(t[:20], splits.hash_split(t, 0.2, 0.1)) for t in texts]
    assert {s for _, s in expected} == {"train", "validation", "test"}
    with BeamTestPipeline(runner="FnApiRunner") as p:
        got = p | beam.Create(texts) | beam.Map(lambda t: (t[:20], splits.hash_split(t, 0.2, 0.1)))
        assert_that(got, equal_to(expected))


def test_read_transform_routes_bad_records(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"text": "a"}\n{"text": null}\n\xff\n')
    with BeamTestPipeline(runner="FnApiRunner") as p:
        out = (
            p
            | beam.Create([("file", str(path), "train", 0, None, None)])
            | beam.ParDo(sources.ReadDocuments("text", 1000)).with_outputs(
                "dead", accounting.STATS, main="docs"
            )
        )
        assert_that(
            out.docs | "texts" >> beam.Map(lambda d: (d.text, d.split, d.line)),
            equal_to([("a", "train", 1)]),
            label="docs",
        )
        assert_that(
            out.dead | "reasons" >> beam.Map(lambda d: (d.line, d.reason[:12])),
            equal_to([(2, "field 'text'"), (3, "invalid UTF-")]),
            label="dead",
        )
        assert_that(
            out[accounting.STATS] | beam.CombinePerKey(sum),
            equal_to([("documents_read", 3), ("documents_rejected", 2)]),
            label="stats",
        )


def test_hf_dataset_splits(tmp_path, corpus_texts, bpe_tokenizer_dir):
    import datasets

    saved = tmp_path / "hf"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"text": corpus_texts[:100]}),
            "validation": datasets.Dataset.from_dict({"text": corpus_texts[100:130]}),
        }
    ).save_to_disk(str(saved))
    out = tmp_path / "out"
    run_prepare(
        "--hf_dataset",
        saved,
        "--hf_splits",
        "train,validation",
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--max_length",
        32,
    )
    assert (
        manifest.read_manifest(str(out / "train")).accounting["split"]["documents_tokenized"] == 100
    )
    assert (
        manifest.read_manifest(str(out / "validation")).accounting["split"]["documents_tokenized"]
        == 30
    )


def test_bad_flags_give_one_clear_line(tmp_path, bpe_tokenizer_dir, capsys):
    code = prepare.run(
        [
            "--input",
            str(tmp_path / "none*.jsonl"),
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2 and "matches no file" in capsys.readouterr().err
    code = prepare.run(["--input", "x", "--tokenizer", str(tmp_path), "--output_dir", "o"])
    assert code == 2 and "holds no tokenizer.json" in capsys.readouterr().err


@pytest.mark.parametrize("dedup", ["exact", "near"])
def test_dataflow_job_graph_builds_offline(tmp_path, bpe_tokenizer_dir, corpus_texts, dedup):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:5])
    code = prepare.run(
        [
            "--runner=DataflowRunner",
            "--dry_run=True",
            "--project=demo-project",
            "--region=us-central1",
            "--temp_location=gs://demo-bucket/tmp",
            "--input",
            str(src),
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            str(tmp_path / "out"),
            "--max_length",
            "32",
            "--dedup",
            dedup,
        ]
    )
    assert code == 0
    assert not os.path.exists(tmp_path / "out")  # a dry run writes nothing


@pytest.mark.slow
def test_dataflow_staging_builds_the_setup_file_without_a_fallback(tmp_path, capfd):
    """Beam stages --setup_file with `python -m build`; without it, users saw "No module
    named build" before Beam fell back to `setup.py sdist`."""
    from apache_beam.runners.portability.stager import Stager

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sdist = Stager._build_setup_package(os.path.join(repo, "setup.py"), str(tmp_path))
    assert os.path.basename(sdist).startswith("mlm_pretrain-")
    assert "No module named build" not in "".join(capfd.readouterr())


@pytest.mark.slow
def test_under_half_a_percent_dropped_on_a_million_tokens(tmp_path, bpe_tokenizer_dir):
    """Default settings, several files and worker processes: the tail loss stays tiny."""
    from beam_pipelines import demo_corpus

    big = tmp_path / "big.jsonl"
    demo_corpus.write_corpus(str(big), 3_600_000)
    lines = big.read_text(encoding="utf-8").splitlines(keepends=True)
    inputs = []
    for i in range(2):
        path = tmp_path / f"part-{i}.jsonl"
        path.write_text("".join(lines[i::2]), encoding="utf-8")
        inputs.append(str(path))
    out = tmp_path / "out"
    run_prepare(
        "--input",
        ",".join(inputs),
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--validation_fraction",
        0.01,
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=2",
        "--read_range_bytes",
        400_000,
    )  # ~9 byte ranges
    total_in = total_dropped = 0
    for split in ("train", "validation"):
        acc = manifest.read_manifest(str(out / split), max_length=128).accounting["split"]
        total_in += acc["tokens_in"]
        total_dropped += acc["tokens_dropped"]
        assert acc["tokens_dropped"] < 128
    assert total_in >= 1_000_000
    assert total_dropped / total_in < 0.005
    run = manifest.read_manifest(str(out / "train")).accounting["run"]
    assert (
        run["documents_read"]
        == len(lines)
        == (run["documents_tokenized"] + run["documents_filtered"] + run["documents_duplicate"])
    )
    assert run["documents_filtered"] + run["documents_duplicate"] < 0.01 * len(lines)


@pytest.mark.parametrize("pad_tail", [True, False])
def test_to_sequences_writes_every_token_once(corpus_texts, bpe_tokenizer_dir, pad_tail):
    """assert_that on the transform: the multiset of tokens out equals the tokens in (minus
    the reported drop), rows are exactly max_length, and stats add up."""
    from collections import Counter

    texts = corpus_texts[:120]
    encoded = encode_all(bpe_tokenizer_dir, texts)
    expected = Counter(t for ids in encoded for t in ids)
    total = sum(expected.values())
    docs = [sources.Document("mem", i, t, "train") for i, t in enumerate(texts)]

    def token_counts(blocks):
        counts = Counter()
        for _, ids, lengths in blocks:
            assert ids.shape[1] == 24
            for row, length in zip(ids, lengths):
                counts.update(row[:length].tolist())
        return counts

    def check(result):
        ((counts, stats),) = result
        stats = dict(stats)
        missing = expected - counts
        assert not counts - expected  # nothing invented
        assert sum(missing.values()) == stats.get("train/tokens_dropped", 0)
        assert stats["train/tokens_in"] == total
        assert stats["train/documents_tokenized"] == len(texts)
        if pad_tail:
            assert not missing

    with BeamTestPipeline(runner="FnApiRunner") as p:
        blocks, stats = (
            p
            | beam.Create(docs)
            | tokenization.ToSequences(bpe_tokenizer_dir, 24, pad_tail, 1, batch_chars=5_000)
        )
        counts = (
            blocks
            | "AllBlocks" >> beam.Flatten()
            | "All" >> beam.combiners.ToList()
            | beam.Map(token_counts)
        )
        summed = stats | beam.CombinePerKey(sum) | "Stats" >> beam.combiners.ToList()
        joined = counts | beam.Map(lambda c, s: (c, s), s=beam.pvalue.AsSingleton(summed))
        assert_that(joined, check)


@pytest.mark.slow
def test_the_pipeline_runs_without_tensorflow(tmp_path, corpus_texts, bpe_tokenizer_dir):
    """Dataflow workers install only setup.py's install_requires (no TensorFlow)."""
    import subprocess
    import sys

    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:30])
    code = (
        "import sys; sys.modules['tensorflow'] = None  # any import of it now fails\n"
        "from beam_pipelines import prepare\n"
        f"sys.exit(prepare.run(['--runner=FnApiRunner', '--input', {str(src)!r}, "
        f"'--tokenizer', {bpe_tokenizer_dir!r}, '--output_dir', "
        f"{str(tmp_path / 'out')!r}, '--max_length', '32']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert manifest.read_manifest(str(tmp_path / "out" / "train")).num_examples > 0
