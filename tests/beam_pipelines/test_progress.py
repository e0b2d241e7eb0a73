"""Progress lines on local runs: the tallies DoFns keep, their sum, and the printed lines."""

import io
import re
import time

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

from beam_pipelines import prepare, progress, sources, tokenization, train_tokenizer
from tests.beam_pipelines.test_prepare import write_jsonl

LINE = re.compile(
    r"^prepare: \d+ s, ([\d,]+ documents checked for copies, )?[\d,]+ documents, "
    r"[\d.]+ M tokens \([\d,]+ tokens/s\)"
)


def test_tallies_of_several_instances_add_up(tmp_path):
    first, second = progress.Tally(str(tmp_path)), progress.Tally(str(tmp_path))
    first.add(documents=2, tokens=100)
    second.add(documents=3, tokens=50)
    second.add(documents=1, tokens=10, shards=1)  # within a second: kept, not yet written
    assert progress.totals(str(tmp_path)) == {"documents": 5, "tokens": 150}
    second.flush()
    assert progress.totals(str(tmp_path)) == {"documents": 6, "tokens": 160, "shards": 1}
    assert progress.line({"documents": 6, "tokens": 3_000_000, "shards": 1}, 2.0) == (
        "prepare: 2 s, 6 documents, 3.0 M tokens (1,500,000 tokens/s), 1 shards written"
    )
    progress.Tally(None).add(documents=1)  # no folder (Dataflow): nothing at all


def test_reporter_prints_every_interval_and_stops(tmp_path):
    out = io.StringIO()
    progress.Tally(str(tmp_path)).add(documents=7, tokens=700)
    with progress.Reporter(str(tmp_path), 0.05, out):
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert 3 <= len(lines) <= 7 and all(
        LINE.match(line) and " 7 documents" in line for line in lines
    )
    time.sleep(0.1)
    assert len(out.getvalue().splitlines()) == len(lines)  # nothing after the block


def test_the_tokenizer_step_tallies_every_document_and_token(
    tmp_path, bpe_tokenizer_dir, corpus_texts
):
    texts = corpus_texts[:40]
    with BeamTestPipeline(runner="FnApiRunner") as p:
        _ = (
            p
            | beam.Create([sources.Document("c", i + 1, t, "train") for i, t in enumerate(texts)])
            | beam.ParDo(
                tokenization.TokenizeAndChunk(bpe_tokenizer_dir, 32, progress_dir=str(tmp_path))
            ).with_outputs(tokenization.TAIL, "stats", main="blocks")
        )
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(bpe_tokenizer_dir + "/tokenizer.json")
    tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts))
    assert progress.totals(str(tmp_path)) == {"documents": 40, "tokens": tokens}


def test_a_local_prepare_prints_progress_lines(tmp_path, bpe_tokenizer_dir, corpus_texts, capsys):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts)
    code = prepare.run(
        [
            "--runner=FnApiRunner",
            "--input",
            str(src),
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            str(tmp_path / "out"),
            "--max_length",
            "32",
            "--progress_seconds",
            "0.05",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    lines = [line for line in out if line.startswith("prepare: ")]
    assert lines and all(LINE.match(line) for line in lines), out[:5]
    assert "documents checked for copies" in lines[-1]  # the dedup's first read, shown
    assert out.index(lines[-1]) < next(
        i for i, line in enumerate(out) if line.startswith("prepared ")
    )


def test_tokenizer_training_prints_reading_progress(tmp_path, corpus_jsonl, capsys):
    train_tokenizer.train(
        train_tokenizer.TokenizerConfig(
            output_dir=str(tmp_path / "tok"),
            input=str(corpus_jsonl),
            model="bpe",
            vocab_size=300,
            progress_seconds=1e-6,
        )
    )
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("reading: ")]
    assert lines and re.match(r"reading: \d+ s, [\d,]+ documents, [\d.]+ M chars", lines[0])
