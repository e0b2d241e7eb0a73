"""Truncated compressed inputs: real .gz/.bz2/.zst/.deflate files cut mid-stream."""

import bz2
import gzip
import json
import zlib

import pytest
import zstandard

from beam_pipelines import sources
from common import decompress, fs

COMPRESS = {
    ".gz": gzip.compress,
    ".bz2": lambda data: bz2.compress(data, compresslevel=1),  # 100 kB blocks
    ".zst": lambda data: zstandard.ZstdCompressor().compress(data),
    ".deflate": zlib.compress,
}


def corpus_lines(n=4000):
    """~600 kB of JSONL that does not compress to nothing (several bz2 / zstd blocks)."""
    return [
        json.dumps(
            {
                "text": f"document {i} "
                + " ".join(f"w{(i * 7919 + j * 104729) % 100003}" for j in range(12))
            }
        )
        for i in range(n)
    ]


def write_cut(path, suffix, lines, keep=0.6):
    data = COMPRESS[suffix](("\n".join(lines) + "\n").encode())
    path.write_bytes(data[: int(len(data) * keep)])
    return str(path)


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_whole_file_reads_back_exactly(tmp_path, suffix):
    lines = corpus_lines(500)
    path = tmp_path / f"c.jsonl{suffix}"
    path.write_bytes(COMPRESS[suffix](("\n".join(lines) + "\n").encode()))
    with fs.open_read(str(path), compressed=True) as f:
        assert f.read().decode().splitlines() == lines


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_cut_raises_at_the_cut_after_the_bytes_before_it(tmp_path, suffix):
    path = write_cut(tmp_path / f"c.jsonl{suffix}", suffix, corpus_lines())
    whole = ("\n".join(corpus_lines()) + "\n").encode()
    got = bytearray()
    with (
        fs.open_read(path, compressed=True) as f,
        pytest.raises(decompress.TruncatedStreamError, match="truncated"),
    ):
        while piece := f.read(1 << 16):
            got += piece
    assert whole.startswith(bytes(got))  # what came before the cut is exact


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_truncated_file_is_one_dead_letter_and_no_fragment(tmp_path, suffix):
    """Documents before the cut are kept (and counted as read); the cut line is no
    document; the file is one dead letter naming it."""
    lines = corpus_lines()
    path = write_cut(tmp_path / f"c.jsonl{suffix}", suffix, lines)
    records = list(sources.read_file(path))
    docs = [r for r in records if isinstance(r, sources.Document)]
    dead = [r for r in records if isinstance(r, sources.DeadLetter)]
    assert len(dead) == 1 and dead[0].source == path
    assert "truncated" in dead[0].reason and dead[0].line == len(docs)
    assert 0 < len(docs) < len(lines)
    assert [d.text for d in docs] == [json.loads(x)["text"] for x in lines[: len(docs)]]


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_a_cut_txt_line_is_not_a_document(tmp_path, suffix):
    lines = [f"line {i} " + "text " * (i % 50) for i in range(3000)]
    path = write_cut(tmp_path / f"c.txt{suffix}", suffix, lines)
    records = list(sources.read_file(path))
    texts = [r.text for r in records if isinstance(r, sources.Document)]
    assert texts == lines[: len(texts)]  # every document is a whole line
    assert sum(isinstance(r, sources.DeadLetter) for r in records) == 1


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".zst"])
def test_concatenated_streams_are_all_read(tmp_path, suffix):
    path = tmp_path / f"c.txt{suffix}"
    path.write_bytes(COMPRESS[suffix](b"a\nb\n") + COMPRESS[suffix](b"c\n"))
    assert [d.text for d in sources.read_file(str(path))] == ["a", "b", "c"]


def test_an_empty_file_is_an_empty_stream(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(b"")
    assert list(sources.read_file(str(path))) == []
