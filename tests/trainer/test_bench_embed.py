"""`python -m benchmarks.bench_embed`: the packed side times a ModernBERT's packed rows in its
own process (a tiny form), is skipped with its reason for a family that reads one text a row,
and the report puts the sides side by side with their ratios."""

import json
import os

import pytest

from benchmarks import bench_embed
from tests.trainer.models.test_checkpoints import make_training_dir

TENSORFLOW_PASS_ONLY = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax", reason="the sides run on JAX in their own processes"
)


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench-embed") / "texts.jsonl"
    words = "the quick brown fox jumps over a lazy dog and runs far away".split()
    lines = [{"text": " ".join(words[: 2 + i % 12])} for i in range(64)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


@TENSORFLOW_PASS_ONLY
def test_packed_side_runs_for_modernbert_and_is_skipped_for_roberta(tmp_path, texts, capsys):
    modernbert = make_training_dir(str(tmp_path), "modernbert")[0]
    roberta = make_training_dir(str(tmp_path), "roberta")[0]
    base = ["--texts", texts, "--count", "64", "--batch", "16", "--max_length", "32",
            "--steps", "1", "--sides", "packed"]  # fmt: skip
    assert bench_embed.main(["--model", modernbert, *base]) == 0
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("packed"))
    assert float(row.split()[1]) > 0 and float(row.split()[2]) > 0  # texts/s, pairs/s
    assert bench_embed.main(["--model", roberta, *base]) == 0
    assert "packed    skipped: a roberta model reads one text a row" in capsys.readouterr().out


def test_the_report_gives_each_side_and_the_ratios():
    found = {
        "buckets": {"encode": 200.0, "train": 50.0},
        "padded": {"encode": 100.0, "train": 40.0},
        "packed": {"encode": 300.0, "train": 80.0},
        "torch": {"encode": 150.0},
        "torch1": {"encode": 120.0},
    }
    lines = bench_embed.report(found).splitlines()
    assert "packed / padded: encode 3.00x, train 2.00x" in lines
    assert "buckets / padded: encode 2.00x, train 1.25x" in lines
    assert "packed / buckets: encode 1.50x, train 1.60x" in lines
    assert "packed / sentence-transformers (best threads): encode 2.00x" in lines
