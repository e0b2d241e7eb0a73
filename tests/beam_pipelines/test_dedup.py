"""Exact deduplication: the normalisation, the Beam transform, and prepare runs on a corpus
with planted copies (across files, in other case, spacing or Unicode forms) and degenerate
documents: every count matches what was planted, the first copy survives, reruns agree."""

import dataclasses
import glob
import json

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines import accounting, dedup, documents, sources
from beam_pipelines.local import exact_dedup as local_dedup
from common import manifest
from common.splits import hash_split
from tests.beam_pipelines.test_prepare import _shard_bytes, encode_all, run_prepare, write_jsonl
from tests.beam_pipelines.test_quality import DEGENERATE

VALIDATION = 0.3


def fullwidth(text):
    """ASCII letters and digits as their full-width forms, which NFKC folds back."""
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


def test_normalise():
    assert dedup.normalise("  Hello,\n\tWORLD  ") == "hello, world"
    assert dedup.normalise(fullwidth("Route 66")) == "route 66"
    assert dedup.normalise("ﬁne Straße") == "fine strasse"  # ligature (NFKC), casefold
    assert dedup.exact_key("A  b") == dedup.exact_key("a b") != dedup.exact_key("a  c")


def test_exact_dedup_keeps_the_first_copy_in_input_order():
    docs = [
        sources.Document("b.jsonl", 1, "Same text", "train"),
        sources.Document("a.jsonl", 0, "same  TEXT", "train", offset=900),
        sources.Document("a.jsonl", 0, "SAME text", "train", offset=100),
        sources.Document("a.jsonl", 0, "other text", "train", offset=50),
        sources.Document("a.jsonl", 0, " ", "train", offset=10),
        sources.Document("b.jsonl", 2, " ", "train"),
    ]
    with BeamTestPipeline(runner="FnApiRunner") as p:
        kept, removed, stats = p | beam.Create(docs) | dedup.ExactDedup(sample_size=1)
        assert_that(
            kept | beam.Map(lambda d: (d.source, d.offset, d.text)),
            equal_to(
                [
                    ("a.jsonl", 100, "SAME text"),
                    ("a.jsonl", 50, "other text"),
                    ("a.jsonl", 10, " "),
                    ("b.jsonl", None, " "),
                ]
            ),
            label="kept",
        )
        assert_that(
            stats | beam.CombinePerKey(sum),
            equal_to([("train/documents_duplicate/exact", 2)]),
            label="stats",
        )
        assert_that(
            removed | beam.Map(lambda r: (r.pos, r.kept)),  # the first removed copy
            equal_to([(("a.jsonl", 900, 0), ("a.jsonl", 100, 0))]),
            label="removed",
        )


def test_the_two_pass_dedup_keeps_and_counts_what_the_one_pass_dedup_does(tmp_path, monkeypatch):
    """Local runs: the first pass sorts keys and places on disk (here in runs of 2 records
    and ranges of 2 documents), the second reads the documents again and keeps the first
    copies; every removed copy comes back as a `Removed`."""
    monkeypatch.setattr(local_dedup, "RANGE_RECORDS", 2)
    monkeypatch.setattr(local_dedup, "RUN_RECORDS", 2)
    docs = [
        sources.Document("b.jsonl", 1, "Same text", "train"),
        sources.Document("a.jsonl", 0, "same  TEXT", "train", offset=900),
        sources.Document("a.jsonl", 0, "SAME text", "train", offset=100),
        sources.Document("a.jsonl", 0, "other text", "train", offset=50),
        sources.Document("a.jsonl", 0, " ", "train", offset=10),
    ]
    with BeamTestPipeline(runner="FnApiRunner") as p:

        def reread(after):
            return (
                p
                | "Again" >> beam.Create(docs)
                | "AfterFirstPass" >> beam.Map(lambda d, _: d, beam.pvalue.AsList(after))
            )

        kept, removed, stats = (
            p
            | beam.Create(docs)
            | local_dedup.ExactDedupByRereading(reread, str(tmp_path), ["train"])
        )
        assert_that(
            kept | beam.Map(lambda d: (d.source, d.offset, d.text)),
            equal_to(
                [("a.jsonl", 100, "SAME text"), ("a.jsonl", 50, "other text"), ("a.jsonl", 10, " ")]
            ),
            label="kept",
        )
        assert_that(
            stats | beam.CombinePerKey(sum),
            equal_to([("train/documents_duplicate/exact", 2)]),
            label="stats",
        )
        assert_that(
            removed | beam.Map(lambda r: (r.pos, r.kept, r.excerpt)),
            equal_to(
                [
                    (("a.jsonl", 900, 0), ("a.jsonl", 100, 0), "same  TEXT"),
                    (("b.jsonl", -1, 1), ("a.jsonl", 100, 0), "Same text"),
                ]
            ),
            label="removed",
        )


def test_the_accounting_check_covers_each_split():
    stats = {
        "documents_read": 4,
        "documents_rejected": 1,
        "train/documents_read": 2,
        "validation/documents_read": 1,
        "train/documents_tokenized": 1,
        "train/documents_duplicate/exact": 1,
        "validation/documents_filtered/min_words": 1,
    }
    accounting.check_accounting(stats, [], ["train", "validation"])
    moved = stats | {"train/documents_read": 1, "validation/documents_read": 2}
    with pytest.raises(accounting.AccountingError, match="train: documents do not add up"):
        accounting.check_accounting(moved, [], ["train", "validation"])
    lost = stats | {"documents_read": 5}
    with pytest.raises(accounting.AccountingError, match="documents do not add up"):
        accounting.check_accounting(lost, [], ["train", "validation"])


def _straddling_pair(texts):
    """A text and a variant of it (other case and spacing) that hash to different splits."""
    for text in texts:
        variant = "  " + text.upper().replace(" ", "   ") + "\n"
        if hash_split(text, VALIDATION, 0) != hash_split(variant, VALIDATION, 0):
            return text, variant
    raise AssertionError("no straddling pair found")


def planted_corpus(tmp_path, corpus_texts):
    """Two files; returns (paths, survivors, expected duplicates, expected filtered counts)."""
    a, b = list(corpus_texts[:40]), list(corpus_texts[40:80])
    x, y, z = corpus_texts[0], corpus_texts[1], corpus_texts[2]
    b.append(x)  # an exact copy in another file
    a.append(y.upper())  # another case
    b.append("\t" + y.replace(" ", "  \t ") + "  ")  # other whitespace
    a.append(fullwidth(z))  # another Unicode form
    text, variant = _straddling_pair(corpus_texts[80:])
    a.append(variant)  # first in input order: the variant survives, in its own split
    b.append(text)
    degenerate = list(DEGENERATE.values())
    a.extend(degenerate)
    b.extend(degenerate)  # degenerate copies are filtered (the filter runs first)
    a.append("")
    b.append("")  # blank documents are counted as empty, never as copies
    survivors = list(corpus_texts[:80]) + [variant]
    filtered = {rule: 2 for rule in DEGENERATE}
    paths = [write_jsonl(tmp_path / "a.jsonl", a), write_jsonl(tmp_path / "b.jsonl", b)]
    return paths, survivors, 5, filtered, (text, variant)


def _args(paths, tok, out, *extra):
    return [
        "--input",
        ",".join(map(str, paths)),
        "--tokenizer",
        tok,
        "--output_dir",
        out,
        "--max_length",
        32,
        "--validation_fraction",
        VALIDATION,
        "--num_shards",
        2,
        "--max_filtered_fraction",
        0.2,
        *extra,
    ]  # planted: 10 of 98 documents filtered


def _accounting(out):
    return {s: manifest.read_manifest(str(out / s)).accounting for s in ("train", "validation")}


def test_planted_duplicates_and_degenerate_documents_are_counted(
    tmp_path, corpus_texts, bpe_tokenizer_dir
):
    paths, survivors, duplicates, filtered, (text, variant) = planted_corpus(tmp_path, corpus_texts)
    out = tmp_path / "out"
    run_prepare(*_args(paths, bpe_tokenizer_dir, out))
    acc = _accounting(out)
    run = acc["train"]["run"]
    assert run["duplicates_by_kind"] == {"exact": duplicates}
    assert run["filtered_by_rule"] == filtered
    assert run["documents_tokenized"] == len(survivors) and run["documents_empty"] == 2
    assert run["documents_read"] == len(survivors) + duplicates + sum(filtered.values()) + 2
    # Each split tokenized exactly its survivors: the straddling pair's removed copy is in
    # no split, its kept copy in its own.
    for split, lengths in _tokens_by_split(bpe_tokenizer_dir, survivors).items():
        assert acc[split]["split"]["tokens_in"] == lengths
        own = acc[split]["split"]
        assert (
            own["documents_read"]
            == sum(
                own[k]
                for k in (
                    "documents_tokenized",
                    "documents_empty",
                    "documents_duplicate",
                    "documents_filtered",
                )
            )
            > 0
        )
    dropped_split = hash_split(text, VALIDATION, 0)
    assert acc[dropped_split]["split"]["duplicates_by_kind"]["exact"] >= 1
    sample = [
        json.loads(line)
        for path in glob.glob(str(out / "dead_letter" / "*removed*"))
        for line in open(path)
    ]
    copies = [r for r in sample if r["rule"] == "duplicate_exact"]
    assert len(copies) == duplicates
    a, b = map(str, paths)
    assert {(r["source"], r["kept"]["source"], r["kept"]["line"]) for r in copies} == {
        (b, a, 1),
        (a, a, 2),
        (b, a, 2),
        (a, a, 3),
        (b, a, 43),
    }  # the variant is a:43


def _tokens_by_split(tok, texts):
    out = {"train": 0, "validation": 0}
    for text, ids in zip(texts, encode_all(tok, texts)):
        out[hash_split(text, VALIDATION, 0)] += len(ids)
    return out


def test_none_keeps_everything_and_reruns_are_byte_identical(
    tmp_path, corpus_texts, bpe_tokenizer_dir
):
    paths, survivors, duplicates, filtered, _ = planted_corpus(tmp_path, corpus_texts)
    out = tmp_path / "out"
    run_prepare(*_args(paths, bpe_tokenizer_dir, out))
    first = {s: _shard_bytes(out / s) for s in ("train", "validation")}
    run_prepare(*_args(paths, bpe_tokenizer_dir, out))
    assert {s: _shard_bytes(out / s) for s in ("train", "validation")} == first

    run_prepare(
        *_args(paths, bpe_tokenizer_dir, out, "--dedup", "none", "--quality_filter", "none")
    )
    run = _accounting(out)["train"]["run"]
    assert run["documents_duplicate"] == run["documents_filtered"] == 0
    assert run["documents_tokenized"] == run["documents_read"] - 2  # all but the blank ones
    assert run["documents_read"] == len(survivors) + duplicates + sum(filtered.values()) + 2


INVISIBLE_COPIES = [
    "Soft\u00adware is eating the world, said the article.",
    "Software is\u200b eating the world, said the article.",
    "Software is eating the\ufeff world, said the article.",
    "Software is eating the world, said\u2060 the article.",
]


def test_copies_that_differ_only_by_invisible_characters_are_one_text(tmp_path):
    assert len({dedup.exact_key(t) for t in INVISIBLE_COPIES}) == 1
    docs = [sources.Document("a.jsonl", i + 1, t, "train") for i, t in enumerate(INVISIBLE_COPIES)]
    with BeamTestPipeline(runner="FnApiRunner") as p:
        kept, _, stats = p | beam.Create(docs) | dedup.ExactDedup(sample_size=1)
        assert_that(kept | beam.Map(lambda d: d.line), equal_to([1]), label="kept")
        assert_that(
            stats | beam.CombinePerKey(sum),
            equal_to([("train/documents_duplicate/exact", 3)]),
            label="stats",
        )


def test_a_prepare_run_drops_invisible_copies(tmp_path, corpus_texts, bpe_tokenizer_dir):
    texts = corpus_texts[:30]
    marked = [t.replace(" ", " \u200b", 1) for t in texts[:10]] + [
        t.replace(" ", "\u00ad ", 1) for t in texts[10:20]
    ]
    path = write_jsonl(tmp_path / "c.jsonl", texts + marked)
    out = tmp_path / "out"
    run_prepare(
        "--input",
        path,
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--max_length",
        32,
        "--quality_filter",
        "none",
    )
    run = manifest.read_manifest(str(out / "train")).accounting["run"]
    assert run["duplicates_by_kind"] == {"exact": 20}
    assert run["documents_tokenized"] == 30


def test_a_text_in_many_copies_is_decided_in_bounded_memory(tmp_path, monkeypatch):
    """A key with N copies put N records in one key range. Each sorted run
    now holds one record per text and split (the first place, and how many copies it stands
    for), so a range holds at most runs x splits records of a text; the decisions and counts
    stay exact."""
    monkeypatch.setattr(local_dedup, "RUN_RECORDS", 50)
    monkeypatch.setattr(local_dedup, "RANGE_RECORDS", 4)
    forms = ["Same text here", "same TEXT here", "SAME text  here", " same text here\n"]
    copies = [
        sources.Document(
            f"{'ab'[i % 2]}.jsonl", 0, forms[i % 4], offset=(7919 * i) % 1201
        )  # places out of input order
        for i in range(600)
    ]
    others = [sources.Document("c.jsonl", i, f"other text {i}") for i in range(20)]
    first = min(copies, key=lambda d: (d.source, d.offset))
    splits = ["train", "validation"]
    in_split = [hash_split(d.text, 0.5, 0.0) for d in copies]
    assert set(in_split) == set(splits)  # the copies' forms fall in both splits
    removed = {s: in_split.count(s) - (s == hash_split(first.text, 0.5, 0.0)) for s in splits}
    loaded, load_range = [], local_dedup.load_range

    def counted(*args):
        found = load_range(*args)
        loaded.append(len(found[0]))
        return found

    monkeypatch.setattr(local_dedup, "load_range", counted)
    docs = copies + others  # as read: the second read's documents carry no split
    chosen = [dataclasses.replace(d, split=hash_split(d.text, 0.5, 0.0)) for d in docs]
    with BeamTestPipeline(runner="FnApiRunner") as p:

        def reread(after):
            return (
                p
                | "Again" >> beam.Create(docs)
                | "AfterFirstPass" >> beam.Map(lambda d, _: d, beam.pvalue.AsList(after))
            )

        kept, gone, stats = (
            p
            | beam.Create(chosen)
            | local_dedup.ExactDedupByRereading(reread, str(tmp_path), splits)
        )
        assert_that(
            kept | beam.Map(lambda d: (d.source, d.offset, d.line, d.split)),
            equal_to(
                [
                    (d.source, d.offset, d.line, hash_split(d.text, 0.5, 0.0))
                    for d in [first] + others
                ]
            ),  # the first read's split
            label="kept",
        )
        assert_that(
            stats | beam.CombinePerKey(sum),
            equal_to([(f"{s}/documents_duplicate/exact", n) for s, n in removed.items()]),
            label="stats",
        )
        assert_that(
            gone | beam.Map(lambda r: r.kept),
            equal_to([documents.doc_position(first)] * 599),
            label="removed",
        )
    runs = len(glob.glob(str(tmp_path / "positions-*.npy")))
    assert max(loaded) <= len(splits) * runs + len(others), (max(loaded), runs)
