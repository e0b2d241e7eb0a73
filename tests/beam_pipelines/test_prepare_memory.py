"""Prepare's peak memory on the local runner, per token: Beam's in-process runner holds
every row until the shard count is known and again in the shuffle, so what matters is how
many bytes each token costs. Measured in child processes on two generated corpus sizes."""

import subprocess
import sys

from beam_pipelines import demo_corpus
from common import manifest

# Before WriteShard streamed its shard and ids travelled as uint16, a token cost 54.7 bytes
# of peak memory in this test; now 20.0. The bound sits between, 1.65x from both.
MAX_BYTES_PER_TOKEN = 33


def _peak_and_tokens(corpus, tokenizer_dir, out) -> tuple[int, int]:
    code = ("import resource, sys\n"
            "from beam_pipelines import prepare\n"
            f"status = prepare.run(['--runner=FnApiRunner', '--input', {str(corpus)!r}, "
            f"'--tokenizer', {tokenizer_dir!r}, '--output_dir', {str(out)!r}, "
            "'--validation_fraction', '0.02', '--progress_seconds', '0'])\n"
            "print('PEAK_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
            "sys.exit(status)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    peak_kb = int(proc.stdout.split("PEAK_KB")[-1].split()[0])
    tokens = sum(manifest.read_manifest(str(out / split)).accounting["split"]["tokens_in"]
                 for split in ("train", "validation"))
    return peak_kb * 1024, tokens


def test_peak_memory_per_token_on_the_local_runner(tmp_path, bpe_tokenizer_dir):
    figures = []
    for megabytes in (3, 15):
        corpus = tmp_path / f"c{megabytes}.jsonl"
        demo_corpus.write_corpus(str(corpus), megabytes * 1_000_000)
        figures.append(_peak_and_tokens(corpus, bpe_tokenizer_dir, tmp_path / f"out{megabytes}"))
    (small_peak, small_tokens), (large_peak, large_tokens) = figures
    assert large_tokens > 3 * small_tokens
    per_token = (large_peak - small_peak) / (large_tokens - small_tokens)
    print(f"peak RSS {small_peak / 1e6:.0f} MB at {small_tokens:,} tokens, "
          f"{large_peak / 1e6:.0f} MB at {large_tokens:,}: {per_token:.1f} bytes per token")
    assert per_token < MAX_BYTES_PER_TOKEN


def test_a_local_run_that_will_not_fit_is_announced_with_the_numbers(
        tmp_path, bpe_tokenizer_dir, capsys, monkeypatch):
    from beam_pipelines import memory_check, prepare

    corpus = tmp_path / "c.jsonl"
    demo_corpus.write_corpus(str(corpus), 700_000)
    tasks = [("file", str(corpus), None, 0, None)]
    assert memory_check.input_text_bytes(tasks) == corpus.stat().st_size
    assert memory_check.warning(tasks, available=64e9) is None
    gz = [("file", "x.jsonl.gz", None, 0, 1000), ("file", "y.txt", None, 0, 500)]
    assert memory_check.input_text_bytes(gz) == 4 * 1000 + 500
    assert memory_check.input_text_bytes([("hf", "train", 0, 1)]) is None

    # 0.7 MB of text needs ~0.4 GB + 0.7e6 / 3.5 * 20 B = ~0.4 GB: announce it on 0.3 GB.
    monkeypatch.setattr(memory_check, "available_bytes", lambda: 0.3e9)
    assert prepare.run(["--runner=FnApiRunner", "--input", str(corpus), "--tokenizer",
                        bpe_tokenizer_dir, "--output_dir", str(tmp_path / "out"),
                        "--progress_seconds", "0"]) == 0
    err = capsys.readouterr().err
    assert "warning: this local prepare may need ~0.4 GB of memory and 0.3 GB is available" in err
    assert "1 MB of text" in err and "Dataflow" in err
    assert manifest.read_manifest(str(tmp_path / "out" / "train")).num_examples > 0  # went on
