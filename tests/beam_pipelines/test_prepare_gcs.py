"""The prepare pipeline reading and writing gs:// through a local GCS emulator."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # the fast lane (make test-fast) leaves it to make test

UPLOAD = """
import sys
from common import fs
src, tok, dst = sys.argv[1:]
for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
    fs.write_bytes(fs.join(dst, "tokenizer", name), open(f"{tok}/{name}", "rb").read())
fs.write_bytes(fs.join(dst, "input", "docs.jsonl"), open(src, "rb").read())
"""

CHECK = """
import json, sys
import tensorflow as tf
from common import manifest, schema
split_dir = sys.argv[1]
m = manifest.read_manifest(split_dir, max_length=32)
n = 0
for path in m.shard_paths(split_dir):  # TensorFlow's own gs:// filesystem reads our shards
    for batch in tf.data.TFRecordDataset(path).batch(1000):
        n += int(schema.parse_batch(batch, 32)[schema.INPUT_IDS].shape[0])
print(json.dumps({"records": n, "manifest": m.num_examples, "shards": len(m.shards)}))
"""


def _run(args, env):
    proc = subprocess.run(
        [sys.executable, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_prepare_on_gcs(gcs, tmp_path, corpus_texts, bpe_tokenizer_dir):
    env = {**os.environ, **gcs.env}
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus_texts[:80]))
    _run(["-c", textwrap.dedent(UPLOAD), str(src), bpe_tokenizer_dir, gcs.url()], env)
    out = _run(
        [
            "-m",
            "beam_pipelines.prepare",
            "--runner=FnApiRunner",
            "--input",
            gcs.url("input", "*.jsonl"),
            "--tokenizer",
            gcs.url("tokenizer"),
            "--output_dir",
            gcs.url("prepared"),
            "--max_length",
            "32",
            "--num_shards",
            "2",
        ],
        env,
    )
    assert "documents read 80 = tokenized 80" in out
    result = json.loads(
        _run(["-c", textwrap.dedent(CHECK), gcs.url("prepared", "train")], env)
        .strip()
        .splitlines()[-1]
    )
    assert result["records"] == result["manifest"] > 0 and result["shards"] == 2


VERIFY_IDS = """
import json, sys
from common import verify
out = sys.argv[1]
print(json.dumps({d.rsplit("/", 1)[-1]: verify.verify_split(d).run_id
                  for d in verify.split_dirs(out)}))
"""


def _attempt(args, env):
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )


def test_commit_protocol_on_gcs(gcs, tmp_path, corpus_texts, bpe_tokenizer_dir):
    """Killed during the commit, refused while another run holds the lock, then a rerun that
    takes the dead run's lock over: every split readable after each step, no orphan left."""
    env = {**os.environ, **gcs.env}
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus_texts[:120]))
    _run(["-c", textwrap.dedent(UPLOAD), str(src), bpe_tokenizer_dir, gcs.url()], env)
    out = gcs.url("prepared2")
    flags = [
        "--runner=FnApiRunner",
        "--input",
        gcs.url("input", "*.jsonl"),
        "--tokenizer",
        gcs.url("tokenizer"),
        "--output_dir",
        out,
        "--max_length",
        "32",
        "--num_shards",
        "2",
        "--validation_fraction",
        "0.2",
    ]
    _run(["-m", "beam_pipelines.prepare", *flags], env)

    def ids():  # {split: run id}, after reading every byte of every shard
        return json.loads(_run(["-c", textwrap.dedent(VERIFY_IDS), out], env).splitlines()[-1])

    first = ids()
    killed = _attempt(
        ["-m", "tests.beam_pipelines.killable_prepare", "commit:1", *flags, "--seed", "5"], env
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    after = ids()  # train committed by the killed run, validation still the first run's
    assert after["validation"] == first["validation"] != after["train"]
    lock = json.loads(gcs.read_object("prepared2/_LOCK"))
    gcs.write_object(
        "prepared2/_LOCK",
        json.dumps({**lock, "host": "elsewhere", "boot_id": "another-machine"}).encode(),
    )
    refused = _attempt(["-m", "beam_pipelines.prepare", *flags], env)
    assert refused.returncode == 2 and "being written by prepare run" in refused.stderr
    gcs.write_object("prepared2/_LOCK", json.dumps(lock).encode())  # this host, dead pid
    again = _attempt(["-m", "beam_pipelines.prepare", *flags], env)
    assert again.returncode == 0 and "no longer exists" in again.stderr, again.stderr[-2000:]
    final = ids()
    assert final["train"] == final["validation"] not in (first["train"], after["train"])
    names = gcs.object_names("prepared2/")
    committed = {n for n in names if n.endswith(".tfrecord")}
    assert len(committed) == 4 and all(final["train"] in n for n in committed), names
    assert "prepared2/_LOCK" not in names


def test_an_output_dir_with_a_bracket_on_gcs_keeps_its_dead_letters(
    gcs, tmp_path, corpus_texts, bpe_tokenizer_dir
):
    """`gs://.../OUT[6]` with dead letters, through the CLI (in this process: Beam's gs://
    client honours the emulator): Beam's text sink renamed its temporary objects through
    a glob (FinalizeWrite: "src and dst files do not exist"); the side files are now
    written whole under literal names. Twice: the first run, then one over it."""
    from beam_pipelines import prepare
    from common import verify

    gcs.apply_env()
    src = tmp_path / "docs.jsonl"
    src.write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in corpus_texts[:60]) + "{not json\n"
    )
    out = gcs.url("OUT[6]")
    flags = [
        "--runner=FnApiRunner",
        "--input",
        str(src),
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        out,
        "--max_length",
        "32",
        "--num_shards",
        "1",
        "--validation_fraction",
        "0.2",
    ]
    for seed in ("0", "1"):
        assert prepare.run([*flags, "--seed", seed]) == 0
        ids = {verify.verify_split(d).run_id for d in verify.split_dirs(out)}
        names = gcs.object_names("OUT[6]/dead_letter/")
        dead = [n for n in names if "-dead_letter-" in n]
        assert len(ids) == 1, ids
        run_id = ids.pop()
        assert dead and all(run_id in n for n in names), names
        assert gcs.read_object(dead[0]).count(b"\n") == 1
    assert not [n for n in gcs.object_names() if "beam-temp" in n or "/.tmp-" in n]
