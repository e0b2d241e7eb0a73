"""Near dedup of local runs (beam_pipelines/local/near_dedup.py) decides as the Beam path does:
the same documents removed, matched to the same earlier ones, the same counts (capped buckets
included), samples and shards; and its band keys keep every bit of minhash's keys."""

import json
import os
import random
import tempfile

from beam_pipelines import minhash, prepare
from beam_pipelines.local import exact_dedup as local_exact
from beam_pipelines.local import near_dedup as local_near
from tests.beam_pipelines.local.test_shuffle import _outputs
from tests.beam_pipelines.test_dedup import _args, planted_corpus, write_jsonl
from tests.beam_pipelines.test_near_dedup import _changed, _near_copy, random_words
from tests.beam_pipelines.test_prepare import run_prepare
from tests.support import multilingual


def test_band_keys_split_into_two_words_without_loss():
    sig = minhash.signature("a b c d e f g".split(), minhash.MinHashConfig())
    keys = minhash.band_keys(sig, minhash.MinHashConfig())
    halves = [local_near.split_key(key) for key in keys]
    assert len(set(halves)) == len(keys) == 14
    for key, (hi, lo) in zip(keys, halves):
        assert key == (
            (lo >> 32).to_bytes(2, "big")
            + hi.to_bytes(8, "big")
            + (lo & 0xFFFFFFFF).to_bytes(4, "big")
        )


def _near_corpus(tmp_path, corpus_texts):
    """planted_corpus (exact copies, filtered and blank documents: documents removed before
    the near step must not come back in its third read) plus English and Chinese near
    copies, and a cluster of look-alikes larger than --near_max_bucket."""
    paths, *_ = planted_corpus(tmp_path, corpus_texts)
    b = [json.loads(line)["text"] for line in open(paths[1], encoding="utf-8")]
    b += [_near_copy(t) for t in corpus_texts[:40] if len(t.split()) >= 150][:3]
    rng = random.Random(4)
    zh = multilingual.documents("zh", 4, seed=5, sentences=(6, 7))
    b += zh + ["".join(_changed(t, rng)) for t in zh]
    base = " ".join(random_words(random.Random(5), 300))
    b += [f"{base} ending{i}" for i in range(6)]
    write_jsonl(paths[1], b)
    return paths


def test_local_near_dedup_removes_what_the_beam_path_removes(
    tmp_path, corpus_texts, bpe_tokenizer_dir, monkeypatch
):
    paths = _near_corpus(tmp_path, corpus_texts)
    spill_root = tmp_path / "tmp"
    spill_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))
    monkeypatch.setattr(local_near, "RUN_DOCS", 9)  # many sorted runs of band records
    monkeypatch.setattr(local_near, "RANGE_RECORDS", 100)  # and many key ranges
    monkeypatch.setattr(local_exact, "RUN_RECORDS", 7)
    args = (
        "--dedup",
        "near",
        "--near_max_bucket",
        "3",
        "--num_shards",
        3,
        "--removed_sample_size",
        1000,
    )  # every removal in the sample
    run_prepare(*_args(paths, bpe_tokenizer_dir, tmp_path / "disk", *args))
    assert os.listdir(spill_root) == []  # the spill folder went with the run

    original = prepare.build

    def grouping(*a, spill_dir=None, **kwargs):  # what Dataflow runs
        return original(*a, **kwargs)

    monkeypatch.setattr(prepare, "build", grouping)
    run_prepare(*_args(paths, bpe_tokenizer_dir, tmp_path / "beam", *args))
    disk, beam = _outputs(tmp_path / "disk"), _outputs(tmp_path / "beam")
    run = disk[2]["train"]["run"]
    assert run["duplicates_by_kind"]["near"] >= 3 + 4 + 2 and run["near_buckets_capped"] > 0
    assert disk[2] == beam[2]  # counts, per split and run-wide
    assert disk[3] == beam[3]  # every removed near copy, matched to the same earlier one
    assert disk[0] == beam[0] and disk[1] == beam[1]  # byte-identical shards, same manifests
