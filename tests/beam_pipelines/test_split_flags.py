"""Split flags on the launcher: a split named twice, and one file reached by two paths."""

import json
import os
import sys

import pytest

from beam_pipelines import prepare, train_tokenizer
from common import fs


def _jsonl(path, texts):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


def _prepare(tmp_path, tokenizer_dir, *args):
    return prepare.run(
        [
            "--runner=FnApiRunner",
            "--tokenizer",
            tokenizer_dir,
            "--output_dir",
            str(tmp_path / "out"),
            "--max_length",
            "32",
            "--progress_seconds",
            "0",
            *args,
        ]
    )


def test_a_split_named_twice_in_splits_is_refused(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys
):
    a = _jsonl(tmp_path / "a.jsonl", corpus_texts[:50])
    b = _jsonl(tmp_path / "b.jsonl", corpus_texts[50:100])
    code = _prepare(tmp_path, bpe_tokenizer_dir, "--splits", f"train={a};train={b}")
    err = capsys.readouterr().err
    assert code == 2 and "names the split 'train' twice" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def _same_file_two_ways(tmp_path):
    os.symlink(tmp_path / "dir" / "a.jsonl", tmp_path / "link.jsonl")
    return [f"{tmp_path}/dir/./a.jsonl", f"{tmp_path}/dir//a.jsonl", f"{tmp_path}/link.jsonl"]


@pytest.mark.parametrize("way", range(3))
def test_one_file_in_two_splits_is_refused_however_it_is_spelled(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys, way
):
    _jsonl(tmp_path / "dir" / "a.jsonl", corpus_texts[:50])
    other = _same_file_two_ways(tmp_path)[way]
    code = _prepare(
        tmp_path,
        bpe_tokenizer_dir,
        "--dedup",
        "none",
        "--splits",
        f"train={tmp_path}/dir/a.jsonl;validation={other}",
    )
    err = capsys.readouterr().err
    assert code == 2 and "matches the --splits globs of both 'train'" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spelling", ["{out}/.", "{out}//", "{link}"])
def test_an_input_inside_the_output_is_refused_however_it_is_spelled(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys, spelling
):
    out = tmp_path / "out"
    _jsonl(out / "in.jsonl", corpus_texts[:50])
    os.symlink(out, tmp_path / "link")
    output_dir = spelling.format(out=out, link=tmp_path / "link")
    code = prepare.run(
        [
            "--runner=FnApiRunner",
            "--input",
            str(out / "in.jsonl"),
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            output_dir,
            "--max_length",
            "32",
        ]
    )
    assert code == 2 and "lies inside --output_dir" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["in.jsonl"]


def test_one_file_given_twice_in_one_input_is_read_once(tmp_path, corpus_texts, bpe_tokenizer_dir):
    from common import manifest

    _jsonl(tmp_path / "dir" / "a.jsonl", corpus_texts[:60])
    code = _prepare(
        tmp_path,
        bpe_tokenizer_dir,
        "--dedup",
        "none",
        "--input",
        f"{tmp_path}/dir/a.jsonl,{tmp_path}/dir/./a.jsonl",
    )
    assert code == 0
    run = manifest.read_manifest(str(tmp_path / "out" / "train")).accounting["run"]
    assert run["documents_read"] == 60


def test_hf_splits_named_twice_are_refused(tmp_path, corpus_texts, bpe_tokenizer_dir, capsys):
    import datasets

    saved = tmp_path / "hf"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict({"text": corpus_texts[:50]})}
    ).save_to_disk(str(saved))
    capsys.readouterr()  # the progress bar of save_to_disk
    code = _prepare(
        tmp_path, bpe_tokenizer_dir, "--hf_dataset", str(saved), "--hf_splits", "train,train"
    )
    err = capsys.readouterr().err
    assert code == 2 and "--hf_splits names 'train' twice" in err
    assert len(err.strip().splitlines()) == 1
    code = train_tokenizer.main(
        [
            "--hf_dataset",
            str(saved),
            "--hf_splits",
            "train,train",
            "--output_dir",
            str(tmp_path / "tok"),
        ]
    )
    assert code == 2 and "--hf_splits names 'train' twice" in capsys.readouterr().err


@pytest.mark.parametrize(
    "path, same",
    [
        ("gs://b/dir/./a.jsonl", "gs://b/dir/a.jsonl"),
        ("gs://b/dir//a.jsonl", "gs://b/dir/a.jsonl"),
        ("gs://b/out/.", "gs://b/out"),
        ("gs://b/x/../out/", "gs://b/out"),
        ("gs://b/", "gs://b/"),
    ],
)
def test_object_names_are_normalised(path, same):
    assert fs.identity(path) == fs.identity(same)


def test_a_local_run_hashes_each_document_for_its_split_once(
    tmp_path, corpus_texts, bpe_tokenizer_dir, monkeypatch
):
    """The split is chosen once, right after the read, and travels with the
    document; the local dedups' second and third reads take it from the first read's
    records. Before, every step (and every reread) hashed the text again."""
    from common import manifest, splits

    texts = [t for t in corpus_texts if len(t.split()) >= 60][:40]
    words = texts[0].split()
    near = " ".join(words[:30] + ["changed"] + words[31:])
    docs = texts + [t.upper() for t in texts[:6]] + [near, " ", "\t"]  # copies, blanks
    calls, original = [], splits.hash_split

    def counted(text, *fractions):
        calls.append(text)
        return original(text, *fractions)

    for module in list(sys.modules.values()):  # wherever it was imported by name
        if getattr(module, "hash_split", None) is original:
            monkeypatch.setattr(module, "hash_split", counted)
    _jsonl(tmp_path / "a.jsonl", docs)
    assert (
        _prepare(
            tmp_path,
            bpe_tokenizer_dir,
            "--input",
            str(tmp_path / "a.jsonl"),
            "--dedup",
            "near",
            "--validation_fraction",
            "0.3",
            "--quality_filter",
            "none",
        )
        == 0
    )
    accounting = manifest.read_manifest(str(tmp_path / "out" / "train")).accounting
    run = accounting["run"]
    assert run["duplicates_by_kind"]["exact"] >= 6 and run["duplicates_by_kind"]["near"] >= 1
    assert run["documents_empty"] >= 2 and run["documents_read"] == len(docs)
    assert sorted(calls) == sorted(docs)  # each document once
    validation = sum(original(t, 0.3, 0.0) == "validation" for t in docs)
    assert accounting["split"]["documents_read"] == len(docs) - validation


def test_a_document_reaching_a_step_without_a_split_is_an_internal_error():
    """No step after the read hashes a text for its split: a missing one is a bug, said so."""
    from beam_pipelines import documents

    assert documents.split_of(documents.Document("a.jsonl", 3, "text", "test")) == "test"
    with pytest.raises(RuntimeError, match="internal error: a.jsonl:3 reached a step without"):
        documents.split_of(documents.Document("a.jsonl", 3, "text"))
