"""Near deduplication: MinHash estimates, recall and precision on generated pairs of known
Jaccard similarity, the Beam transform against the one-process reference, and a prepare run
with planted near copies."""

import glob
import json
import random
import string

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines import dedup, minhash, near_dedup, quality, sources
from common import manifest, word_units
from tests.beam_pipelines.test_dedup import _args, planted_corpus, write_jsonl
from tests.beam_pipelines.test_prepare import _shard_bytes, run_prepare
from tests.support import multilingual

CONFIG = minhash.MinHashConfig()


def random_words(rng, n):
    return [
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
        for _ in range(n)
    ]


def shingle_jaccard(a, b, n=5):
    sa = {tuple(a[i : i + n]) for i in range(len(a) - n + 1)}
    sb = {tuple(b[i : i + n]) for i in range(len(b) - n + 1)}
    return len(sa & sb) / len(sa | sb)


def pair_with_jaccard(rng, target, length=204):
    """Two word lists sharing a prefix, sized so that their 5-gram Jaccard is ~`target`."""
    shingles = length - 4
    shared = round(2 * shingles * target / (1 + target))  # J = s / (2S - s)
    base = random_words(rng, length)
    return base, base[: shared + 4] + random_words(rng, length - shared - 4)


def test_signatures_are_stable_and_estimate_jaccard():
    rng = random.Random(1)
    a, b = pair_with_jaccard(rng, 0.6)
    sig = minhash.signature(a, CONFIG)
    assert sig.dtype == np.uint32 and len(sig) == 112
    assert (sig == minhash.signature(list(a), CONFIG)).all()
    true = shingle_jaccard(a, b)
    assert abs(minhash.estimated_jaccard(sig, minhash.signature(b, CONFIG)) - true) < 0.15
    assert minhash.signature(["one", "two"], CONFIG).shape == (112,)  # shorter than a shingle
    assert len(set(minhash.band_keys(sig, CONFIG))) == 14


@pytest.mark.parametrize("target, low, high", [(0.9, 0.9, 1.0), (0.5, 0.0, 0.0)])
def test_recall_and_precision_on_generated_pairs(target, low, high):
    """>= 90 % of pairs at Jaccard 0.9 are found; none at 0.5; no unrelated document goes."""
    rng = random.Random(target)
    docs = {}
    for i in range(200):
        a, b = pair_with_jaccard(rng, target)
        assert abs(shingle_jaccard(a, b) - target) < 0.01
        docs[("a", -1, i)], docs[("b", -1, i)] = a, b
    found = minhash.near_duplicates(docs, CONFIG)
    assert all(
        source == "b" and earlier == ("a", -1, i) for (source, _, i), (earlier, _) in found.items()
    )  # only the later copy goes
    assert low <= len(found) / 200 <= high, len(found)


def _changed(text, rng, share=0.01):
    """`text` with max(1, share x units) units (words, or CJK/Thai characters) replaced."""
    units = minhash.units_of(text)
    for i in rng.sample(range(len(units)), max(1, round(share * len(units)))):
        units[i] = "X" if word_units.is_spaced_word(units[i]) else "变"
    return units


def _judged_alike(a, b):
    return bool(minhash.near_duplicates({0: a, 1: b}, CONFIG))


@pytest.mark.parametrize("lang", multilingual.UNSPACED)
def test_near_copies_in_scripts_without_spaces_are_found(lang):
    """Shingles of characters, not of whole sentences: 1 % of the characters changed (one or
    two here) leaves a near copy that is found; split at spaces almost none was."""
    rng = random.Random(lang)
    docs = multilingual.documents(lang, 30, seed=1, sentences=(5, 7))
    found = sum(_judged_alike(minhash.units_of(d), _changed(d, rng)) for d in docs)
    assert found >= 27, found
    pool = multilingual.SENTENCES[lang]
    sep = multilingual.SEPARATOR[lang]
    apart = (sep.join(pool[:5]), sep.join(pool[6:11]))  # no sentence in common
    assert not _judged_alike(*map(minhash.units_of, apart))


def test_spaced_text_keeps_its_shingles():
    """English (and every script written with spaces) gets the units it always had."""
    for lang in ("en", "de", "ru"):
        for text in multilingual.documents(lang, 5, seed=2):
            text = text.upper() + "  \n ﬁne"
            assert minhash.units_of(text) == dedup.normalise(text).split()


def test_beam_transform_agrees_with_the_reference():
    rng = random.Random(7)
    docs, words = [], {}
    for i in range(30):
        a, b = pair_with_jaccard(rng, [0.95, 0.85, 0.5][i % 3])
        for name, w in (("a.jsonl", a), ("b.jsonl", b)):
            docs.append(sources.Document(name, i + 1, " ".join(w), "train"))
            words[(name, -1, i + 1)] = w
    rng = random.Random(8)  # and Chinese near copies, found only by character shingles
    for i, text in enumerate(multilingual.documents("zh", 6, seed=3, sentences=(6, 7))):
        for name, t in (("a.jsonl", text), ("b.jsonl", "".join(_changed(text, rng)))):
            docs.append(sources.Document(name, 100 + i, t, "train"))
            words[(name, -1, 100 + i)] = minhash.units_of(t)
    expected = minhash.near_duplicates(words, CONFIG)
    assert {("b.jsonl", -1, 100 + i) for i in range(6)} <= set(expected)
    assert 15 + 6 <= len(expected) <= 20 + 12
    with BeamTestPipeline(runner="FnApiRunner") as p:
        kept, removed, stats = p | beam.Create(docs) | near_dedup.NearDedup(CONFIG)
        assert_that(
            removed | beam.Map(lambda r: (r.pos, r.kept)),
            equal_to([(k, v[0]) for k, v in expected.items()]),
            label="removed",
        )
        assert_that(
            kept | beam.Map(lambda d: (d.source, -1, d.line)),
            equal_to([k for k in words if k not in expected]),
            label="kept",
        )
        assert_that(
            stats | beam.CombinePerKey(sum),
            equal_to([("train/documents_duplicate/near", len(expected))]),
            label="n",
        )


def test_over_full_buckets_are_capped_and_counted():
    """12 copies fill each band's bucket; only the first 5 (in input order) are compared."""
    text = " ".join(random_words(random.Random(3), 60))
    docs = [sources.Document("a.jsonl", i + 1, text, "train") for i in range(12)]
    config = minhash.MinHashConfig(near_max_bucket=5)
    with BeamTestPipeline(runner="FnApiRunner") as p:
        _, removed, stats = p | beam.Create(docs) | near_dedup.NearDedup(config)
        assert_that(
            stats | beam.CombinePerKey(sum),
            equal_to(
                [
                    ("run.near_buckets_capped", 14),
                    ("run.near_bucket_members_unchecked", 14 * 7),
                    ("train/documents_duplicate/near", 4),
                ]
            ),
        )
        assert_that(
            removed | beam.Map(lambda r: (r.pos[2], r.kept[2])),
            equal_to([(2, 1), (3, 1), (4, 1), (5, 1)]),
            label="removed",
        )


def _near_copy(text):
    """The text with one word in its middle replaced (5-gram Jaccard ~0.93 for 150 words)."""
    words = text.split(" ")
    words[len(words) // 2] = "REPLACED"
    return " ".join(words)


def test_prepare_removes_planted_near_copies(tmp_path, corpus_texts, bpe_tokenizer_dir):
    paths, survivors, exact, filtered, _ = planted_corpus(tmp_path, corpus_texts)
    long_ones = [t for t in corpus_texts[:40] if len(t.split()) >= 150][:4]
    assert len(long_ones) >= 2
    b_lines = open(paths[1], encoding="utf-8").read().splitlines()
    near = [_near_copy(t) for t in long_ones]
    b = [json.loads(line)["text"] for line in b_lines] + near
    write_jsonl(paths[1], b)
    out = tmp_path / "out"
    run_prepare(*_args(paths, bpe_tokenizer_dir, out, "--dedup", "near"))
    first = _shard_bytes(out / "train")
    run_prepare(*_args(paths, bpe_tokenizer_dir, out, "--dedup", "near"))
    assert _shard_bytes(out / "train") == first  # reruns agree
    run = manifest.read_manifest(str(out / "train")).accounting["run"]
    # The reference, on what reached the near step: not filtered, not blank, first copies.
    config = quality.QualityConfig()
    seen, words = set(), {}
    for path in map(str, paths):
        for line, obj in enumerate(map(json.loads, open(path, encoding="utf-8")), 1):
            key = dedup.exact_key(obj["text"])
            if (
                obj["text"].strip()
                and not quality.failing_rule(obj["text"], config)
                and key not in seen
            ):
                seen.add(key)
                words[(path, -1, line)] = minhash.units_of(obj["text"])
    expected = minhash.near_duplicates(words, CONFIG)
    planted = {(str(paths[1]), -1, len(b_lines) + 1 + i) for i in range(len(near))}
    assert planted <= set(expected)
    assert run["duplicates_by_kind"] == {"exact": exact, "near": len(expected)}
    assert run["filtered_by_rule"] == filtered
    sample = [
        json.loads(line)
        for path in glob.glob(str(out / "dead_letter" / "*removed*"))
        for line in open(path)
    ]
    near_sample = {(r["source"], -1, r["line"]) for r in sample if r["rule"] == "duplicate_near"}
    assert near_sample == set(expected)


def test_capped_buckets_reach_the_manifest_and_the_summary(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys
):
    base = " ".join(random_words(random.Random(5), 300))
    texts = corpus_texts[:20] + [f"{base} ending{i}" for i in range(6)]
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
        "--dedup",
        "near",
        "--near_max_bucket",
        3,
    )
    run = manifest.read_manifest(str(out / "train")).accounting["run"]
    assert run["near_buckets_capped"] >= 1 and run["near_bucket_members_unchecked"] >= 3
    assert 2 <= run["duplicates_by_kind"]["near"] <= 5
    assert "LSH buckets over --near_max_bucket" in capsys.readouterr().out
