"""What a rerun reproduces (docs/prepare.md, "Reruns"): with the same input and flags, the
same runner and the same bundling gives byte-identical shards; another bundling (here two
worker threads instead of one) keeps every per-document decision, every count and each
split's tokens, but may cut rows elsewhere, since rows are cut from each bundle's stream of
documents in arrival order."""

import collections
import hashlib
import json

import numpy as np
import pytest
import tensorflow as tf

from beam_pipelines import prepare
from common import manifest
from tests.beam_pipelines.test_prepare import write_jsonl

pytestmark = pytest.mark.slow  # the fast lane (make test-fast) leaves it to make test

SPLITS = ("train", "validation")


def _args(src, tok, out, *extra):
    return [
        "--runner=FnApiRunner",
        "--input",
        str(src),
        "--tokenizer",
        tok,
        "--output_dir",
        str(out),
        "--max_length",
        "32",
        "--validation_fraction",
        "0.2",
        "--num_shards",
        "2",
        "--pad_tail",
        *extra,
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, corpus_texts, bpe_tokenizer_dir):
    root = tmp_path_factory.mktemp("reruns")
    texts = corpus_texts[:600] + corpus_texts[:20]  # 20 copies
    for part in range(4):  # several files: bundles in flight at once
        write_jsonl(root / f"c{part}.jsonl", texts[part::4])
    src = root / "c*.jsonl"
    threads = ["--direct_num_workers=2", "--direct_running_mode=multi_threading"]
    outs = {}
    for name, extra in (("one", []), ("again", []), ("threads", threads)):
        outs[name] = root / name
        assert prepare.run(_args(src, bpe_tokenizer_dir, outs[name], *extra)) == 0
    return outs


def _shard_digests(out):
    return {
        split: [
            hashlib.sha256(open(p, "rb").read()).hexdigest()
            for p in manifest.read_manifest(str(out / split)).shard_paths(str(out / split))
        ]
        for split in SPLITS
    }


def _token_counts(out, split) -> collections.Counter:
    found = manifest.read_manifest(str(out / split))
    counts = collections.Counter()
    for record in tf.data.TFRecordDataset(found.shard_paths(str(out / split))):
        example = tf.train.Example.FromString(record.numpy())
        ids = np.array(example.features.feature["input_ids"].int64_list.value)
        mask = np.array(example.features.feature["attention_mask"].int64_list.value)
        counts.update(ids[mask == 1].tolist())
    return counts


def test_a_rerun_with_the_same_bundling_writes_the_same_bytes(runs):
    assert _shard_digests(runs["again"]) == _shard_digests(runs["one"])


def test_another_bundling_keeps_every_decision_count_and_token(runs):
    for split in SPLITS:
        one = manifest.read_manifest(str(runs["one"] / split))
        threads = manifest.read_manifest(str(runs["threads"] / split))
        assert json.dumps(threads.accounting, sort_keys=True) == json.dumps(
            one.accounting, sort_keys=True
        )
        assert (threads.num_tokens, threads.num_examples) == (one.num_tokens, one.num_examples)
        assert _token_counts(runs["threads"], split) == _token_counts(runs["one"], split)
