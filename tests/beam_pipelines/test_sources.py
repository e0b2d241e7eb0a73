import gzip
import json

import pytest

from beam_pipelines import input_spec, sources


def _docs(records):
    return [r for r in records if isinstance(r, sources.Document)]


@pytest.mark.parametrize("range_bytes", [7, 64, 1000])
def test_byte_ranges_read_every_line_exactly_once(tmp_path, range_bytes):
    lines = [json.dumps({"text": f"document {i} " + "x" * (i % 37)}) for i in range(300)]
    lines[50] = "{broken"
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    whole = list(sources.read_file(str(path)))
    ranges = input_spec.byte_ranges(str(path), path.stat().st_size, range_bytes=range_bytes)
    assert len(ranges) > 1
    pieces = [
        r for start, end in ranges for r in sources.read_file(str(path), start=start, end=end)
    ]
    assert [d.text for d in _docs(pieces)] == [d.text for d in _docs(whole)]
    dead = [r for r in pieces if isinstance(r, sources.DeadLetter)]
    assert len(dead) == 1 and dead[0].offset == sum(len(x) + 1 for x in lines[:50])


def test_compressed_and_paragraph_files_are_read_whole(tmp_path):
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"text": "a"}\n' * 100))
    assert input_spec.byte_ranges(str(gz), 10_000, range_bytes=10) == [(0, None)]
    assert input_spec.byte_ranges("x.txt", 10_000, "paragraph", range_bytes=10) == [(0, None)]
    assert len(_docs(sources.read_file(str(gz)))) == 100


def test_paragraph_unit_and_line_numbers(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("first para\nstill first\n\nsecond\n\n\nthird\n")
    docs = _docs(sources.read_file(str(path), txt_unit="paragraph"))
    assert [(d.line, d.text) for d in docs] == [
        (1, "first para\nstill first"),
        (4, "second"),
        (7, "third"),
    ]


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


class _ResetAfter:
    """A reader whose connection resets after `limit` bytes (a transient network error)."""

    def __init__(self, f, limit):
        self.f, self.limit, self.done = f, limit, 0

    def read(self, n=-1):
        if self.done >= self.limit:
            raise ConnectionResetError(104, "Connection reset by peer")
        data = self.f.read(n)
        self.done += len(data)
        return data

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def _big_jsonl(tmp_path, n=40_000):
    path = tmp_path / "big.jsonl"
    path.write_text(
        "".join(json.dumps({"text": f"document number {i} " * 3}) + "\n" for i in range(n))
    )
    assert path.stat().st_size > 2 << 20
    return path


def test_a_connection_reset_mid_file_fails_the_bundle_and_a_retry_reads_all(tmp_path, monkeypatch):
    path = _big_jsonl(tmp_path)
    real_open = sources.fs.open_read
    attempts = {"n": 0}

    def flaky_open(p, compressed=False):
        attempts["n"] += 1
        f = real_open(p, compressed)
        return _ResetAfter(f, 1 << 20) if attempts["n"] == 1 else f

    monkeypatch.setattr(sources.fs, "open_read", flaky_open)
    emitted = []
    with pytest.raises(ConnectionResetError):
        for record in sources.read_file(str(path)):
            emitted.append(record)
    assert emitted and not [r for r in emitted if isinstance(r, sources.DeadLetter)]
    retried = list(sources.read_file(str(path)))  # what the runner's retry of the bundle reads
    assert len(_docs(retried)) == 40_000 == len(retried)


def test_the_pipeline_fails_rather_than_dropping_the_rest_of_a_file(tmp_path, monkeypatch):
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline

    path = _big_jsonl(tmp_path)
    real_open = sources.fs.open_read
    monkeypatch.setattr(
        sources.fs,
        "open_read",
        lambda p, compressed=False: _ResetAfter(real_open(p, compressed), 1 << 20),
    )
    with pytest.raises(Exception, match="Connection reset"):
        with TestPipeline(runner="FnApiRunner") as p:
            (
                p
                | beam.Create([("file", str(path), "train", 0, None, None)])
                | beam.ParDo(sources.ReadDocuments("text", 1 << 20))
            )


@pytest.mark.parametrize(
    "error, is_format",
    [
        (ConnectionResetError(104, "reset"), False),
        (TimeoutError("timed out"), False),
        (PermissionError(13, "denied"), False),
        (OSError("Invalid data stream"), True),
        (EOFError("Compressed file ended before the end-of-stream marker"), True),
        (gzip.BadGzipFile("Not a gzipped file"), True),
        (ValueError("not a parquet file"), True),
    ],
)
def test_format_and_io_errors_are_told_apart(error, is_format):
    assert sources.is_format_error(error) is is_format


def test_google_api_server_errors_are_retried():
    from google.api_core import exceptions

    assert not sources.is_format_error(exceptions.ServiceUnavailable("503"))
    assert not sources.is_format_error(exceptions.InternalServerError("500"))


def test_a_corrupt_gzip_is_still_dead_lettered(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    data = bytearray(
        gzip.compress(
            "".join(
                json.dumps({"text": f"doc {i} {i * 7919 % 10007}"}) + "\n" for i in range(3000)
            ).encode()
        )
    )
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # a damaged block
    path.write_bytes(bytes(data))
    records = list(sources.read_file(str(path)))
    dead = [r for r in records if isinstance(r, sources.DeadLetter)]
    assert len(dead) == 1 and "unreadable after" in dead[0].reason


@pytest.mark.parametrize("suffix", [".jsonl", ".txt"])
def test_a_byte_order_mark_loses_no_record(tmp_path, suffix):
    path = tmp_path / f"bom{suffix}"
    lines = [json.dumps({"text": "first"}), json.dumps({"text": "second"})]
    if suffix == ".txt":
        lines = ["first", "second"]
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")
    assert [d.text for d in sources.read_file(str(path))] == ["first", "second"]


def test_a_runner_that_retries_bundles_reads_every_document(tmp_path, monkeypatch):
    """FnApiRunner fails the job on the first error; the bundle-based DirectRunner (like
    Dataflow) retries the bundle, and the retry reads the whole file, dead-lettering nothing."""
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    from beam_pipelines.accounting import STATS

    path = _big_jsonl(tmp_path)
    real_open, calls = sources.fs.open_read, []

    def flaky_open(p, compressed=False):
        calls.append(p)
        f = real_open(p, compressed)
        return _ResetAfter(f, 1 << 20) if len(calls) == 1 else f

    monkeypatch.setattr(sources.fs, "open_read", flaky_open)
    with beam.Pipeline("BundleBasedDirectRunner") as p:
        read = (
            p
            | beam.Create([("file", str(path), None, 0, None, None)])
            | beam.ParDo(sources.ReadDocuments("text", 1 << 20)).with_outputs(
                "dead", STATS, main="docs"
            )
        )
        assert_that(read.docs | beam.combiners.Count.Globally(), equal_to([40_000]))
        assert_that(
            read.dead | "Dead" >> beam.combiners.Count.Globally(),
            equal_to([0]),
            label="NoDeadLetter",
        )
    assert len(calls) == 2  # the failed attempt and its retry


@pytest.mark.parametrize("blank", ["\u3000", "\x1c", "\x85", "\x0b\x0c", " \u00a0 ", "\u2028"])
def test_a_jsonl_line_of_other_whitespace_is_a_dead_letter_not_lost(tmp_path, blank):
    """Only JSON's own whitespace (space, tab, CR) makes a blank line between objects; a
    line of any other whitespace or separator is not JSON, so it is dead-lettered: every
    line is a document, a dead letter or a JSON-blank line."""
    path = tmp_path / "w.jsonl"
    path.write_bytes(
        (
            "\n".join(
                [json.dumps({"text": "first"}), blank, " \t\r", json.dumps({"text": "second"})]
            )
            + "\n"
        ).encode()
    )
    records = list(sources.read_file(str(path)))
    assert [d.text for d in _docs(records)] == ["first", "second"]
    (dead,) = [r for r in records if isinstance(r, sources.DeadLetter)]
    assert dead.line == 2 and "malformed JSON" in dead.reason
