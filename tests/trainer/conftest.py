"""Fixtures of the trainer tests; the data helpers live in tests/trainer/mlm_data.py.

The same files run on both backends (`make test` runs them once per KERAS_BACKEND)."""

import os

import pytest

from tests.trainer.mlm_data import (
    STEPS,
    make_tokenizer,
    repetitive_sequences,
    task_args,
    write_split,
)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """A tokenizer, a manifest train split (2048 rows) and eval split (256 rows)."""
    root = tmp_path_factory.mktemp("corpus")
    info = make_tokenizer(root / "tokenizer")
    write_split(str(root / "train"), *repetitive_sequences(2048, seed=0), info)
    write_split(
        str(root / "eval"),
        *repetitive_sequences(256, seed=1),
        info,
        num_shards=2,
        split="validation",
    )
    return {
        "root": root,
        "info": info,
        "tokenizer": str(root / "tokenizer"),
        "train": str(root / "train"),
        "eval": str(root / "eval"),
    }


@pytest.fixture(scope="session")
def prepared_run(tmp_path_factory, corpus_jsonl, bpe_tokenizer_dir):
    """A real tiny run end to end: Beam prepare of the real-prose corpus (so the manifest
    has real document, dedup and filter counts), 20 training steps, no export."""
    from tests.trainer.mlm_data import prepared_tiny_run

    return prepared_tiny_run(
        tmp_path_factory.mktemp("prepared_run"), corpus_jsonl, bpe_tokenizer_dir
    )


@pytest.fixture(scope="session")
def full_run(corpus, tmp_path_factory):
    """The uninterrupted reference run (STEPS, two checkpoints kept)."""
    from trainer.pretraining import task

    output_dir = tmp_path_factory.mktemp("full")
    assert task.main(task_args(corpus, output_dir, *STEPS, "--keep_checkpoints", "2")) == 0
    return output_dir


def _two_cpu_devices():
    """Two CPU devices for the multi-replica tests (MirroredStrategy on TensorFlow,
    DataParallel on JAX): only possible before the backend initialises its devices, i.e. at
    collection time, before any test runs."""
    if os.environ.get("KERAS_BACKEND") == "jax":
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count=2".strip()
        return
    from trainer.backends.tensorflow_strategy import split_cpu

    split_cpu(2)


_two_cpu_devices()
