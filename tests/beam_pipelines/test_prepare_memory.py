"""Prepare's peak memory on the local runner stays flat as the corpus grows: rows are
shuffled through files (beam_pipelines/local/shuffle.py) and exact copies found from keys
sorted on disk (beam_pipelines/local/exact_dedup.py). Measured in child processes, default
cleaning, on two generated corpora 4x apart; the spill runs and shards are made small so
that both sizes are past the point where those buffers stop growing."""

import subprocess
import sys

import pytest

from beam_pipelines import demo_corpus
from common import manifest

pytestmark = pytest.mark.slow  # the fast lane (make test-fast) leaves it to make test

# Before this design (rows in a GroupByKey and a side-input wait, texts in the dedup's
# grouping) peak memory grew by 6.9 bytes per byte of text in this test; now by 1.1-2.0
# (what fills the bounded buffers, and ~120 bytes a document). The bound sits between.
MAX_BYTES_PER_TEXT_BYTE = 3.5


def _peak(corpus, tokenizer_dir, out, *extra) -> int:
    code = (
        "import sys\n"
        "from beam_pipelines import prepare\n"
        "from beam_pipelines.local import memory_check, shuffle as local_shuffle\n"
        "from beam_pipelines.local import near_dedup as local_near\n"
        "local_shuffle.RUN_BYTES = 256 << 10\n"
        "local_near.RUN_DOCS, local_near.RANGE_RECORDS = 500, 1 << 14\n"
        f"status = prepare.run(['--runner=FnApiRunner', '--input', {str(corpus)!r}, "
        f"'--tokenizer', {tokenizer_dir!r}, '--output_dir', {str(out)!r}, "
        "'--validation_fraction', '0.02', '--progress_seconds', '0', "
        f"'--shard_size', '2000', *{list(extra)!r}])\n"
        "print('PEAK', memory_check.peak_rss_bytes())\n"
        "sys.exit(status)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = manifest.read_manifest(str(out / "train"))
    assert len(m.shards) > 3 and m.accounting["run"]["documents_tokenized"] > 0
    return int(proc.stdout.split("PEAK")[-1].split()[0])


def _slope(tmp_path, tokenizer_dir, megabytes, *extra) -> float:
    sizes, peaks = [], []
    for mb in megabytes:
        corpus = tmp_path / f"c{mb}.jsonl"
        demo_corpus.write_corpus(str(corpus), mb * 1_000_000)
        sizes.append(corpus.stat().st_size)
        peaks.append(_peak(corpus, tokenizer_dir, tmp_path / f"out{mb}", *extra))
    slope = (peaks[1] - peaks[0]) / (sizes[1] - sizes[0])
    print(
        f"peak RSS {peaks[0] / 1e6:.0f} MB at {sizes[0] / 1e6:.0f} MB of text, "
        f"{peaks[1] / 1e6:.0f} MB at {sizes[1] / 1e6:.0f} MB: {slope:.2f} bytes per byte"
    )
    return slope


def test_peak_memory_is_flat_in_corpus_size_on_the_local_runner(tmp_path, bpe_tokenizer_dir):
    """With `--dedup near`, the default path (tokenize, exact dedup from keys sorted on disk,
    the shuffle through files) plus near dedup: band records and signatures through sorted
    runs on disk, a third read of the input (beam_pipelines/local/near_dedup.py). One run of
    every bounded buffer (CI time: the default path alone was a second 80 s test, 1.1 B/B
    measured there); before, near dedup held the texts and signatures in Beam's grouping:
    ~35 bytes per byte of text."""
    slope = _slope(tmp_path, bpe_tokenizer_dir, (3, 12), "--dedup", "near")
    assert slope < MAX_BYTES_PER_TEXT_BYTE


def test_a_local_run_that_will_not_fit_is_announced_with_the_numbers(
    tmp_path, bpe_tokenizer_dir, capsys, monkeypatch
):
    from beam_pipelines import prepare
    from beam_pipelines.local import memory_check

    corpus = tmp_path / "c.jsonl"
    demo_corpus.write_corpus(str(corpus), 700_000)
    tasks = [("file", str(corpus), None, 0, None, None)]
    assert memory_check.input_text_bytes(tasks) == corpus.stat().st_size
    assert memory_check.warning(tasks, 128, 8000, available=64e9, free_disk=1e12) is None
    gz = [("file", "x.jsonl.gz", None, 0, 1000, None), ("file", "y.txt", None, 0, 500, None)]
    assert memory_check.input_text_bytes(gz) == 4 * 1000 + 500
    assert memory_check.input_text_bytes([("hf", "train", 0, 1)]) is None
    # Near dedup's runs on disk: ~1 KB per (assumed 1 KB) document, 0.7 MB here.
    assert memory_check.warning(tasks, 128, 8000, near=True, available=2e9, free_disk=1e12) is None
    near = memory_check.warning(tasks, 128, 8000, near=True, available=64e9, free_disk=1e6)
    assert "~0.0 GB of temporary disk for the shuffle and near dedup" in near
    # The shuffle's files: 0.7 MB / 3.5 bytes a token x 2 bytes (uint16 ids) = ~0.4 MB.
    disk = memory_check.warning(tasks, 128, 8000, available=64e9, free_disk=0.3e6)
    assert "~0.0 GB of temporary disk" in disk and "TMPDIR" in disk and "memory" not in disk

    monkeypatch.setattr(memory_check, "available_bytes", lambda: 0.5e9)
    assert (
        prepare.run(
            [
                "--runner=FnApiRunner",
                "--input",
                str(corpus),
                "--tokenizer",
                bpe_tokenizer_dir,
                "--output_dir",
                str(tmp_path / "out"),
                "--progress_seconds",
                "0",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert (
        "warning: this local prepare of 1 MB of text may need ~0.8 GB of memory and "
        "0.5 GB is available (~120 bytes per document)"
    ) in err
    assert "Dataflow" in err
    assert manifest.read_manifest(str(tmp_path / "out" / "train")).num_examples > 0  # went on
