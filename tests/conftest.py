"""Shared fixtures: a small corpus of real prose and tokenizers trained on it."""

import json
import os

import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Before any test module imports TensorFlow or Keras: what every command does first
# (trainer/startup/launch.py: TensorFlow imported with its harmless start-up lines hidden); a
# test module's own `import tensorflow` otherwise prints the cuInit line once per worker.
from trainer.startup import launch  # noqa: E402

launch.prepare([])

pytest_plugins = ["tests.support.gcs", "tests.support.hub", "tests.support.kaggle"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: a long run (fault loop, pod, end to end, gs://, subprocess training) "
        "that `make test-fast` leaves to `make test`",
    )


@pytest.fixture(scope="session")
def corpus_jsonl(tmp_path_factory):
    """~300 KB of real English (docstrings of the standard library), one JSONL doc each."""
    from beam_pipelines import demo_corpus

    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    demo_corpus.write_corpus(str(path), 300_000)
    return path


@pytest.fixture(scope="session")
def corpus_texts(corpus_jsonl):
    with open(corpus_jsonl, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


@pytest.fixture(scope="session")
def bpe_tokenizer_dir(corpus_jsonl, tmp_path_factory):
    """A byte-level BPE tokenizer (RoBERTa-style specials) trained on the corpus."""
    from beam_pipelines import train_tokenizer

    out = tmp_path_factory.mktemp("tok_bpe")
    train_tokenizer.train(
        train_tokenizer.TokenizerConfig(
            output_dir=str(out), input=str(corpus_jsonl), model="bpe", vocab_size=800
        )
    )
    return str(out)
