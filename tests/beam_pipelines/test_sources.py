import gzip
import json

import pytest

from beam_pipelines import sources


def _docs(records):
    return [r for r in records if isinstance(r, sources.Document)]


@pytest.mark.parametrize("range_bytes", [7, 64, 1000])
def test_byte_ranges_read_every_line_exactly_once(tmp_path, range_bytes):
    lines = [json.dumps({"text": f"document {i} " + "x" * (i % 37)}) for i in range(300)]
    lines[50] = "{broken"
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    whole = list(sources.read_file(str(path)))
    ranges = sources.byte_ranges(str(path), path.stat().st_size, range_bytes=range_bytes)
    assert len(ranges) > 1
    pieces = [r for start, end in ranges for r in sources.read_file(str(path), start=start,
                                                                     end=end)]
    assert [d.text for d in _docs(pieces)] == [d.text for d in _docs(whole)]
    dead = [r for r in pieces if isinstance(r, sources.DeadLetter)]
    assert len(dead) == 1 and dead[0].offset == sum(len(x) + 1 for x in lines[:50])


def test_compressed_and_paragraph_files_are_read_whole(tmp_path):
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"text": "a"}\n' * 100))
    assert sources.byte_ranges(str(gz), 10_000, range_bytes=10) == [(0, None)]
    assert sources.byte_ranges("x.txt", 10_000, "paragraph", range_bytes=10) == [(0, None)]
    assert len(_docs(sources.read_file(str(gz)))) == 100


def test_paragraph_unit_and_line_numbers(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("first para\nstill first\n\nsecond\n\n\nthird\n")
    docs = _docs(sources.read_file(str(path), txt_unit="paragraph"))
    assert [(d.line, d.text) for d in docs] == [(1, "first para\nstill first"), (4, "second"),
                                                 (7, "third")]


def test_parquet_missing_column_accounts_for_every_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"body": ["a", "b", "c"]}), path)
    (dead,) = list(sources.read_file(str(path), text_field="text"))
    assert dead.documents == 3 and "no column 'text'" in dead.reason


def test_unsupported_extension_is_dead_lettered(tmp_path):
    (dead,) = list(sources.read_file(str(tmp_path / "notes.docx")))
    assert "unsupported file type" in dead.reason
