"""--input on the launcher: a folder is refused at once with the glob to
give instead; a glob with no folder part matches in the current folder."""

import json

import pytest

from beam_pipelines import input_spec, prepare, train_tokenizer
from common import manifest


def _jsonl(path, texts):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


@pytest.mark.parametrize("spelling", ["{d}", "{d}/"])
def test_a_folder_as_input_is_refused_on_the_launcher(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys, spelling
):
    _jsonl(tmp_path / "corpus" / "a.jsonl", corpus_texts[:20])
    folder = spelling.format(d=tmp_path / "corpus")
    code = prepare.run(
        [
            "--runner=FnApiRunner",
            "--input",
            folder,
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "is a folder" in err and f"'{tmp_path / 'corpus'}/*.jsonl'" in err
    assert not (tmp_path / "out").exists()
    code = train_tokenizer.main(["--input", folder, "--output_dir", str(tmp_path / "tok")])
    err = capsys.readouterr().err
    assert code == 2 and "is a folder" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "tok").exists()


def test_a_folder_in_splits_is_refused_naming_the_flag(tmp_path, bpe_tokenizer_dir, capsys):
    (tmp_path / "corpus").mkdir()
    code = prepare.run(
        [
            "--runner=FnApiRunner",
            "--splits",
            f"train={tmp_path}/corpus",
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2 and "--splits" in capsys.readouterr().err


def test_a_glob_without_a_folder_matches_in_the_current_folder(
    tmp_path, corpus_texts, bpe_tokenizer_dir, monkeypatch
):
    _jsonl(tmp_path / "a.jsonl", corpus_texts[:30])
    _jsonl(tmp_path / "b.jsonl", corpus_texts[30:60])
    _jsonl(tmp_path / "sub" / "c.jsonl", corpus_texts[60:70])  # `*` stays in its folder
    monkeypatch.chdir(tmp_path)
    assert list(input_spec.expand_inputs("*.jsonl")) == ["a.jsonl", "b.jsonl"]
    assert list(input_spec.expand_inputs("?.jsonl,s*/c.jsonl")) == [
        "a.jsonl",
        "b.jsonl",
        "sub/c.jsonl",
    ]
    code = prepare.run(
        [
            "--runner=FnApiRunner",
            "--input",
            "*.jsonl",
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            "out",
            "--max_length",
            "32",
            "--dedup",
            "none",
            "--progress_seconds",
            "0",
        ]
    )
    assert code == 0
    run = manifest.read_manifest(str(tmp_path / "out" / "train")).accounting["run"]
    assert run["documents_read"] == 60
