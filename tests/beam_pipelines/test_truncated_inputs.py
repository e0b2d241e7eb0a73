"""A truncated compressed input, end to end: prepare on FnApiRunner and train_tokenizer."""

import bz2
import glob
import gzip
import json

import pytest
import zstandard

from beam_pipelines import prepare, train_tokenizer
from common import manifest

CUT = {
    ".gz": gzip.compress,
    ".bz2": lambda data: bz2.compress(data, compresslevel=1),
    ".zst": lambda data: zstandard.ZstdCompressor().compress(data),
}


def write_cut(path, texts, keep=0.6):
    data = CUT[path.name[path.name.rindex(".") :]](
        "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()
    )
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def many_texts(corpus_texts, n=3000):
    """Distinct documents (the exact dedup must not hide a loss) of real prose."""
    return [f"{corpus_texts[i % len(corpus_texts)]} (copy {i})" for i in range(n)]


@pytest.mark.parametrize("suffix", sorted(CUT))
def test_prepare_dead_letters_a_truncated_file_and_counts_what_it_kept(
    tmp_path, corpus_texts, bpe_tokenizer_dir, suffix
):
    texts = many_texts(corpus_texts)
    cut = write_cut(tmp_path / f"cut.jsonl{suffix}", texts)
    out = tmp_path / "out"
    code = prepare.run(
        [
            "--runner=FnApiRunner",
            "--input",
            str(cut),
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            str(out),
            "--max_length",
            "32",
            "--quality_filter",
            "none",
            "--progress_seconds",
            "0",
        ]
    )
    assert code == 0
    dead = [
        json.loads(line)
        for path in glob.glob(str(out / "dead_letter" / "*-dead_letter*"))
        for line in open(path)
    ]
    assert len(dead) == 1 and dead[0]["source"] == str(cut)
    assert "truncated" in dead[0]["reason"]
    run = manifest.read_manifest(str(out / "train")).accounting["run"]
    kept = dead[0]["line"]  # documents read before the cut: kept and counted
    assert 0 < kept < len(texts)
    assert run["documents_read"] == kept + 1 and run["documents_rejected"] == 1
    assert run["documents_tokenized"] == kept  # no fragment of the cut line


def test_train_tokenizer_reports_a_truncated_file(tmp_path, corpus_texts, capsys):
    cut = write_cut(tmp_path / "cut.jsonl.gz", many_texts(corpus_texts))
    info = train_tokenizer.train(
        train_tokenizer.TokenizerConfig(
            output_dir=str(tmp_path / "tok"), input=str(cut), vocab_size=400
        )
    )
    assert f"skipped {cut}:" in capsys.readouterr().err
    assert info["documents_rejected"] == 1
    letters = (tmp_path / "tok" / "dead_letter.jsonl").read_text().splitlines()
    assert len(letters) == 1 and "truncated" in json.loads(letters[0])["reason"]
    assert info["documents_read"] == json.loads(letters[0])["line"]
