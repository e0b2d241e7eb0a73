"""Decontamination (`prepare --decontaminate`, beam_pipelines/decontamination.py): the
normalisation and n-grams, the evaluation files' readers, real runs on the FnApiRunner with
planted contaminated documents (found and removed, or reported; none of the clean ones, near
misses included), and each bad input refused in one line before anything is written."""

import glob
import gzip
import hashlib
import json

import numpy as np
import pytest

from beam_pipelines import decontamination, eval_files, hashing, prepare, summary
from common import manifest
from tests.beam_pipelines.test_prepare import encode_all, read_split, write_jsonl

PAIR_HASHES = ["0x4aad9f7a9a36ffff", "0xaa6fc34b27226499"]  # measured 2026-12-03
WORDS = "river stone light field market window garden letter silver morning harbor".split()
# An SST-2-like dev file (TSV, GLUE's `sentence` column): both sentences are over 13 words.
SST_A = "the film is a charming and often affecting journey through the quiet hills of an old town"
SST_B = "a gorgeously strange movie whose heart never quite finds the rhythm its bold premise wants"
# A trainer.finetune-like pair file (JSONL, text and text_pair): an 11-word text (under 13,
# at least 8: matched whole), a 15-word one, and a 4-word one (skipped, counted).
MINE_SHORT = "which river flows through the ancient capital city of the north"
MINE_PAIR = "the northern capital has stood beside the great river for more than a thousand years"
MINE_TINY = "too short to check"
PLANTED = {  # contaminated: each shares an n-gram with the sets named, despite case and marks
    "Review roundup. The Film is a CHARMING and often-affecting journey through the quiet "
    "hills, critics said; the rest of the season was dull.": ("sst2",),
    f"Quiz night: {MINE_SHORT.capitalize()}? Nobody in the pub knew the answer.": ("mine",),
    f"Two quotes: “{SST_B}”, and {MINE_SHORT}.": ("sst2", "mine"),
}
NEAR_MISSES = [  # clean: 12 of the 13 words, a skipped short text, one word changed
    "the film is a charming and often affecting journey through the quiet meadow of spring",
    f"the clerk wrote {MINE_TINY} on every form in the office that morning",
    "which river flows through the old capital city of the north and into the grey sea",
]


def _clean_texts(n: int) -> list[str]:
    return [
        f"note {i:03d} " + " ".join(WORDS[(i * 5 + k * 3) % len(WORDS)] for k in range(14))
        for i in range(n)
    ] + NEAR_MISSES


def _eval_files(folder) -> dict:
    sst = folder / "dev.tsv"
    sst.write_text(f"sentence\tlabel\n{SST_A}\t1\n{SST_B}\t0\n", encoding="utf-8")
    mine = folder / "dev.jsonl"
    rows = [
        {"text": MINE_SHORT, "text_pair": MINE_PAIR, "label": "a"},
        {"text": MINE_TINY, "text_pair": "", "label": "b"},
    ]
    mine.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {"sst2": sst, "mine": mine}


def _run(folder, tokenizer, action: str, name: str = ""):
    texts = _clean_texts(40)
    for i, text in enumerate(PLANTED):
        texts.insert(7 + 11 * i, text)
    corpus = write_jsonl(folder / "corpus.jsonl", texts)
    sets = _eval_files(folder)
    out = folder / (name or action)
    code = prepare.run(
        ["--runner=FnApiRunner", "--input", str(corpus), "--tokenizer", tokenizer]
        + ["--output_dir", str(out), "--max_length", "32", "--pad_tail", "--num_shards", "1"]
        + ["--quality_filter", "none", "--decontam_action", action, "--decontaminate"]
        + [";".join(f"{name}={path}" for name, path in sets.items())]
    )
    assert code == 0
    return texts, sets, out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, bpe_tokenizer_dir):
    folder = tmp_path_factory.mktemp("decontamination")
    return {action: _run(folder, bpe_tokenizer_dir, action) for action in ("remove", "report")}


def test_normalisation_folds_case_marks_and_compatibility_forms():
    units = decontamination.units_of("The cat's-paw, (ＮＦＫＣ) ﬁne\u200b — 東京へ。")
    assert units == ["the", "cat", "s", "paw", "nfkc", "fine", "東", "京", "へ"]
    assert decontamination.units_of("Thai ก่อน stays") == ["thai", "ก่", "อ", "น", "stays"]


def test_short_texts_are_matched_whole_or_skipped():
    grams, length = decontamination.text_ngrams(MINE_SHORT, 13, 8)
    assert (len(grams), length) == (1, 11)  # 11 units: one n-gram of them all
    assert decontamination.text_ngrams(MINE_TINY, 13, 8)[1] == 0  # 4 < 8: skipped
    assert len(decontamination.text_ngrams(SST_A, 13, 8)[0]) == len(SST_A.split()) - 12
    spec = decontamination.DecontamSpec((("a", ""), ("b", "")), ("text",), 13, 8, "remove")
    index, counts = decontamination.build_index(spec, {"a": [SST_A, MINE_TINY], "b": [SST_A]})
    grams = len(SST_A.split()) - 13 + 1
    assert counts["a"] == {"texts": 2, "texts_whole": 0, "texts_skipped": 1, "ngrams": grams}
    assert index.lengths == (13,) and set(index.masks.tolist()) == {3}  # both sets hold each
    assert decontamination.matches(f"so: {SST_A.upper()}!", index, 2) == [grams, grams]
    assert decontamination.matches(SST_A.rsplit(" ", 1)[0], index, 2) == [grams - 1] * 2


def test_ngram_hashes_keep_their_values():
    """Every worker and rerun must hash an n-gram alike: fixed bits, lengths kept apart."""
    units = hashing.unit_hashes(["a", "b", "c"])
    assert int(units[0]) == int.from_bytes(hashlib.blake2b(b"a", digest_size=8).digest(), "little")
    pairs = hashing.ngram_hashes(units, 2)
    assert [hex(int(h)) for h in pairs] == PAIR_HASHES
    assert int(hashing.ngram_hashes(units[:2], 2)[0]) == int(pairs[0])
    assert int(pairs[0]) not in set(hashing.ngram_hashes(units, 3).tolist())
    assert len(hashing.ngram_hashes(units, 4)) == 0


def test_unspaced_scripts_match_by_characters():
    text = "东京是日本的首都也是世界上人口最多的城市之一"  # 22 characters: 10 13-grams
    spec = decontamination.DecontamSpec((("zh", ""),), ("text",), 13, 8, "remove")
    index, counts = decontamination.build_index(spec, {"zh": [text]})
    assert counts["zh"]["ngrams"] == 10
    assert decontamination.matches(f"新闻：{text}。", index, 1) == [10]
    assert decontamination.matches(text[:12] + "，" + text[12:], index, 1) == [10]  # marks go
    assert decontamination.matches("西" + text[1:], index, 1) == [9]  # the first 13-gram differs


def test_hashed_lookup_agrees_with_comparing_the_ngrams(corpus_texts):
    """On real prose (and its tables of repeated tokens), with short texts matched whole:
    the index finds exactly the n-grams a comparison of unit tuples finds."""
    rng = np.random.default_rng(3)
    evals = (
        [  # shuffled words, and every 50th text's real runs of 20 and of 9 words
            " ".join(rng.choice(words, size=int(rng.integers(5, 30))))
            for text in corpus_texts[:3000]
            if (words := text.split())
        ]
        + [
            " ".join(text.split()[start : start + size])
            for text in corpus_texts[::50]
            for start, size in ((5, 20), (40, 9))
        ]
    )
    spec = decontamination.DecontamSpec((("a", ""),), ("text",), 13, 8, "remove")
    index, _ = decontamination.build_index(spec, {"a": evals})
    grams = set()
    for text in evals:
        units = decontamination.units_of(text)
        size = 13 if len(units) >= 13 else len(units) if len(units) >= 8 else 0
        grams |= {tuple(units[i : i + size]) for i in range(len(units) - size + 1) if size}
    found, cache = 0, {}
    for text in corpus_texts:
        units = decontamination.units_of(text)
        expected = sum(
            tuple(units[i : i + size]) in grams
            for size in index.lengths
            for i in range(len(units) - size + 1)
        )
        assert decontamination.matches(text, index, 1, cache) == [expected]
        found += expected
    assert found > 0  # the comparison saw matches, not only their absence


def test_an_index_over_its_bound_is_refused(monkeypatch):
    monkeypatch.setattr(decontamination, "MAX_INDEX_NGRAMS", 4)
    spec = decontamination.DecontamSpec((("a", ""),), ("text",), 13, 8, "remove")
    with pytest.raises(decontamination.DecontamError, match="5 distinct 13-grams, over"):
        decontamination.build_index(spec, {"a": [SST_A]})


def test_eval_files_read_jsonl_tsv_and_csv(tmp_path):
    mrpc = tmp_path / "dev.tsv"  # GLUE's MRPC: a byte-order mark, quotes are characters
    mrpc.write_text('\ufeffQuality\t#1 String\t#2 String\n1\tHe said "yes\tno way\n', "utf-8")
    found = eval_files.read_texts(str(mrpc), ("text", "#1 String", "#2 String"))
    assert found.texts == ('He said "yes', "no way") and found.columns == ("#1 String", "#2 String")
    assert found.sha256 == hashlib.sha256(mrpc.read_bytes()).hexdigest()
    table = tmp_path / "q.csv"
    table.write_text('query,positive\n"a, b",c\n', encoding="utf-8")
    assert eval_files.read_texts(str(table), ("query", "positive")).texts == ("a, b", "c")
    pairs = tmp_path / "p.jsonl.gz"
    pairs.write_bytes(gzip.compress(json.dumps({"query": "q", "positive": ["x", "y"]}).encode()))
    assert eval_files.read_texts(str(pairs), ("query", "positive")).texts == ("q", "x", "y")


def _written_counts(out) -> np.ndarray:
    written = np.zeros(1000, np.int64)
    for ids, masks in read_split(str(out / "train"), 32).values():
        np.add.at(written, ids[masks == 1], 1)
    return written


def _expected_counts(tokenizer, texts) -> np.ndarray:
    expected = np.zeros(1000, np.int64)
    for ids in encode_all(tokenizer, texts):
        np.add.at(expected, np.array(ids, np.int64), 1)
    return expected


def _sample(out) -> list[dict]:
    return [
        json.loads(line)
        for path in glob.glob(str(out / "dead_letter" / "*removed_sample*"))
        for line in open(path, encoding="utf-8")
    ]


def test_planted_documents_are_found_and_removed(runs, bpe_tokenizer_dir):
    texts, sets, out = runs["remove"]
    m = manifest.read_manifest(str(out / "train"))
    record = m.decontamination
    assert m.format_version == manifest.FORMAT_VERSION
    assert (record["ngram"], record["min_words"], record["action"]) == (13, 8, "remove")
    assert "NFKC" in record["normalisation"]
    sst2, mine = record["sets"]["sst2"], record["sets"]["mine"]
    assert sst2["files"] == [
        {
            "path": str(sets["sst2"]),
            "sha256": hashlib.sha256(sets["sst2"].read_bytes()).hexdigest(),
            "bytes": sets["sst2"].stat().st_size,
            "columns": ["sentence"],
            "texts": 2,
        }
    ]
    assert (sst2["texts"], sst2["texts_whole"], sst2["texts_skipped"]) == (2, 0, 0)
    assert (mine["texts"], mine["texts_whole"], mine["texts_skipped"]) == (3, 1, 1)
    assert mine["files"][0]["columns"] == ["text", "text_pair"]
    assert (sst2["documents_matched"], mine["documents_matched"]) == (2, 2)
    assert (record["documents_matched"], record["documents_removed"]) == (3, 3)
    run = m.accounting["run"]
    assert run["documents_contaminated"] == 3
    assert run["contaminated_by_set"] == {"mine": 1, "sst2": 2}  # under the first set matched
    assert run["documents_read"] == len(texts) == run["documents_tokenized"] + 3
    # Every clean document's tokens are written, none of a planted one's (--pad_tail drops none).
    clean = [t for t in texts if t not in PLANTED]
    written = _written_counts(out)
    assert (written == _expected_counts(bpe_tokenizer_dir, clean)).all()
    sample = _sample(out)
    assert sorted(r["rule"] for r in sample) == ["contaminated:mine"] + ["contaminated:sst2"] * 2
    both = next(r for r in sample if r["excerpt"].startswith("Two quotes"))
    assert both["reason"] == "shares 3 n-gram(s) with sst2, 1 n-gram(s) with mine"
    assert {r["line"] for r in sample} == {texts.index(t) + 1 for t in PLANTED}
    printed = summary.summarize(str(out), ["train"])
    assert f"= tokenized {len(texts) - 3} + empty 0 + " in printed
    assert "filtered 0 + contaminated 3 (see" in printed
    assert "decontamination (13-grams, remove): 3 documents matched, 3 removed" in printed
    assert (
        "  mine: 2 documents share 2 n-grams with its 3 texts (1 matched whole, 1 too short)"
        in (printed)
    )


def test_report_keeps_and_counts_them(runs, bpe_tokenizer_dir):
    texts, _, out = runs["report"]
    m = manifest.read_manifest(str(out / "train"))
    run = m.accounting["run"]
    assert run["documents_contaminated"] == 0 and run["contaminated_by_set"] == {}
    assert run["documents_tokenized"] == len(texts)
    assert m.decontamination["documents_matched"] == 3
    assert m.decontamination["documents_removed"] == 0
    removing = manifest.read_manifest(str(runs["remove"][2] / "train")).decontamination
    assert m.decontamination["sets"] == removing["sets"]  # the same matches, only kept
    assert (_written_counts(out) == _expected_counts(bpe_tokenizer_dir, texts)).all()
    sample = _sample(out)
    assert len(sample) == 3 and all(
        r["reason"].endswith("(--decontam_action report)") for r in sample
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--decontaminate", "a={missing}"], "--decontaminate a '{missing}' matches no file"),
        (["--decontaminate", "a={nocol}"], "has no text column among --decontam_columns"),
        (["--decontaminate", "a={empty}"], "evaluation file {empty} is empty"),
        (["--decontaminate", "a={blank}"], "holds no text in text"),
        (["--decontaminate", "a={bad}"], "{bad}:2: malformed JSON"),
        (["--decontaminate", "a={good}", "--decontam_ngram", "0"], "--decontam_ngram must be"),
        (["--decontaminate", "a={good};a={good}"], "--decontaminate names 'a' twice"),
        (["--decontaminate", "a/b={good}"], "--decontaminate name 'a/b' may hold only"),
        (["--decontam_action", "report"], "--decontam_action: give --decontaminate NAME=PATH"),
        (["--decontaminate", "a={good}", "--decontam_columns", " , "], "names no column"),
    ],
)
def test_bad_input_is_one_line_before_anything_is_written(tmp_path, capsys, flags, message):
    corpus = write_jsonl(tmp_path / "c.jsonl", ["one document here"])
    names = {
        "missing": tmp_path / "none.jsonl",
        "nocol": tmp_path / "nocol.tsv",
        "empty": tmp_path / "empty.jsonl",
        "blank": tmp_path / "blank.jsonl",
        "bad": tmp_path / "bad.jsonl",
        "good": tmp_path / "good.jsonl",
    }
    names["nocol"].write_text("label\tsent\n1\tsome words\n", encoding="utf-8")
    names["empty"].write_text("", encoding="utf-8")
    names["blank"].write_text('{"text": "  "}\n', encoding="utf-8")
    names["bad"].write_text('{"text": "fine"}\n{"text": \n', encoding="utf-8")
    names["good"].write_text('{"text": "a fine evaluation text of words"}\n', encoding="utf-8")
    flags = [f.format(**names) for f in flags]
    out = tmp_path / "out"
    code = prepare.run(
        ["--runner=FnApiRunner", "--input", str(corpus), *flags, "--tokenizer"]
        + [str(tmp_path / "tok"), "--output_dir", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert message.format(**names) in err
    assert not out.exists()


def test_dataflows_grouping_path_finds_the_same(runs, bpe_tokenizer_dir, monkeypatch):
    """Decontamination sits between the cleaning and the tokenizer, outside the executions'
    seam: the grouping execution (Dataflow's) gives the on-disk one's records."""
    out = runs["remove"][2]
    original = prepare.build

    def grouping(*args, spill_dir=None, **kwargs):  # what Dataflow runs
        return original(*args, **kwargs)

    monkeypatch.setattr(prepare, "build", grouping)
    _, _, grouped = _run(out.parent, bpe_tokenizer_dir, "remove", "grouped")
    read = [manifest.read_manifest(str(o / "train")) for o in (out, grouped)]
    assert read[0].decontamination == read[1].decontamination
    assert read[0].accounting == read[1].accounting
    assert (_written_counts(out) == _written_counts(grouped)).all()


def test_dataflow_job_graph_builds_offline(tmp_path, bpe_tokenizer_dir):
    """The index and the sets' record travel in the job graph (side inputs) and validate."""
    corpus = write_jsonl(tmp_path / "c.jsonl", _clean_texts(3))
    sets = _eval_files(tmp_path)
    code = prepare.run(
        ["--runner=DataflowRunner", "--dry_run=True", "--project=demo-project"]
        + ["--region=us-central1", "--temp_location=gs://demo-bucket/tmp", "--input", str(corpus)]
        + ["--tokenizer", bpe_tokenizer_dir, "--output_dir", str(tmp_path / "out")]
        + ["--decontaminate", f"sst2={sets['sst2']};mine={sets['mine']}"]
    )
    assert code == 0
    assert not (tmp_path / "out").exists()  # a dry run writes nothing
