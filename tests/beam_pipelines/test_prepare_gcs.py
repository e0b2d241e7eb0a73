"""The prepare pipeline reading and writing gs:// through a local GCS emulator."""

import json
import os
import subprocess
import sys
import textwrap

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
    proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                              os.path.abspath(__file__)))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_prepare_on_gcs(gcs, tmp_path, corpus_texts, bpe_tokenizer_dir):
    env = {**os.environ, **gcs.env}
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus_texts[:80]))
    _run(["-c", textwrap.dedent(UPLOAD), str(src), bpe_tokenizer_dir, gcs.url()], env)
    out = _run(["-m", "beam_pipelines.prepare", "--runner=FnApiRunner",
                "--input", gcs.url("input", "*.jsonl"), "--tokenizer", gcs.url("tokenizer"),
                "--output_dir", gcs.url("prepared"), "--max_length", "32",
                "--num_shards", "2"], env)
    assert "documents read 80 = tokenized 80" in out
    result = json.loads(_run(["-c", textwrap.dedent(CHECK), gcs.url("prepared", "train")],
                             env).strip().splitlines()[-1])
    assert result["records"] == result["manifest"] > 0 and result["shards"] == 2
