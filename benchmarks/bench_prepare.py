"""Prepare-pipeline throughput against its ceiling, the tokenizer's own encode_batch.

    python -m benchmarks.bench_prepare [--corpus_mb 20] [--workers N] [--out bench_out/prepare]

Runs, on the same corpus (docstrings of installed packages, no download): (a) the fast
tokenizer's encode_batch over every document (the ceiling: all cores, no I/O, nothing
written) and (b) the full prepare pipeline on Beam's local runner (in-process: the Rust
tokenizer's threads use every core; `--workers N` adds a run with N worker processes);
prints tokens/s of each and the ratio, best of `--trials` interleaved runs. (b) removes
nothing (`--quality_filter none --dedup none`); (c) times each removal step alone
(`--cleaning quality,exact,near`) on the same corpus, as a cost relative to (b); (d) runs
prepare with its default cleaning in a child process at 1x and 4x the corpus (the 4x
corpus holds each document in 4 versions that are no exact copies, so all of it is
tokenized and shuffled) and prints the peak memory of each, the slope per byte of text,
and the bytes the shuffle moved per byte written (`--memory 0` skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from beam_pipelines import demo_corpus, prepare, train_tokenizer
from common import manifest, tokenizer_files


def ceiling(corpus: str, tokenizer_dir: str, batch_chars: int) -> tuple[int, float]:
    tokenizer, _ = tokenizer_files.load(tokenizer_dir)
    with open(corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    start, tokens, batch, size = time.perf_counter(), 0, [], 0
    for text in texts + [None]:
        if text is not None:
            batch.append(text)
            size += len(text)
        if batch and (text is None or size >= batch_chars):
            tokens += sum(len(e.ids) for e in tokenizer.encode_batch_fast(batch))
            batch, size = [], 0
    return tokens, time.perf_counter() - start


NOTHING_REMOVED = ["--quality_filter", "none", "--dedup", "none"]
# What removing documents costs, each against NOTHING_REMOVED on the same corpus.
CLEANING = {
    "quality": ("--quality_filter basic", ["--quality_filter", "basic", "--dedup", "none"]),
    "exact": ("--dedup exact", ["--quality_filter", "none", "--dedup", "exact"]),
    "near": ("--dedup near", ["--quality_filter", "none", "--dedup", "near"]),
}


def run_pipeline(
    corpus, tok_dir, out, runner_args, expected_tokens, cleaning_args=NOTHING_REMOVED
) -> tuple[float, int]:
    """Wall seconds of one prepare run, and the documents it removed."""
    start = time.perf_counter()
    code = prepare.run(
        [
            "--input",
            corpus,
            "--tokenizer",
            tok_dir,
            "--output_dir",
            out,
            "--max_length",
            "128",
            "--validation_fraction",
            "0.01",
            "--runner=FnApiRunner",
            *cleaning_args,
            *runner_args,
        ]
    )
    wall = time.perf_counter() - start
    if code:
        raise SystemExit(code)
    tokens_in = sum(
        manifest.read_manifest(os.path.join(out, s)).accounting["split"]["tokens_in"]
        for s in ("train", "validation")
    )
    run = manifest.read_manifest(os.path.join(out, "train")).accounting["run"]
    removed = run["documents_duplicate"] + run["documents_filtered"]
    assert removed or tokens_in == expected_tokens, (tokens_in, expected_tokens)
    return wall, removed


def versions(corpus: str, n: int) -> str:
    """`corpus` n times, each document's text prefixed by its version number after the
    first: n times the text and tokens, and no exact copies for the dedup to remove."""
    path = corpus.replace(".jsonl", f"-v{n}.jsonl")
    if not os.path.exists(path):
        with open(corpus, encoding="utf-8") as f:
            lines = f.readlines()
        with open(path, "w", encoding="utf-8") as f:
            for k in range(n):
                for line in lines:
                    record = json.loads(line)
                    if k:
                        record["text"] = f"(version {k + 1}) {record['text']}"
                    f.write(json.dumps(record) + "\n")
    return path


PEAK_CODE = """import sys, time
from beam_pipelines import prepare
from beam_pipelines.local import memory_check
start = time.perf_counter()
code = prepare.run(sys.argv[1:])
print("PEAK", memory_check.peak_rss_bytes(), time.perf_counter() - start)
sys.exit(code)
"""


def peak_memory(corpus: str, tok_dir: str, out: str) -> dict:
    """A default prepare of `corpus` in a child process: its peak RSS, wall time, and the
    shuffle's bytes (from the manifest) against the bytes of shards written."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PEAK_CODE,
            "--runner=FnApiRunner",
            "--input",
            corpus,
            "--tokenizer",
            tok_dir,
            "--output_dir",
            out,
            "--max_length",
            "128",
            "--validation_fraction",
            "0.01",
            "--progress_seconds",
            "0",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    peak, wall = proc.stdout.split("PEAK")[-1].split()
    manifests = [manifest.read_manifest(os.path.join(out, s)) for s in ("train", "validation")]
    return {
        "peak": int(peak),
        "wall": float(wall),
        "shuffle": manifests[0].accounting["run"]["shuffle_bytes"],
        "written": sum(sh.num_bytes for m in manifests for sh in m.shards),
    }


def report_memory(corpus: str, tok_dir: str, out: str) -> None:
    mb = os.path.getsize(corpus) / 1e6
    one = peak_memory(corpus, tok_dir, os.path.join(out, "memory-1x"))
    big = versions(corpus, 4)
    four = peak_memory(big, tok_dir, os.path.join(out, "memory-4x"))
    slope = (four["peak"] - one["peak"]) / (os.path.getsize(big) - os.path.getsize(corpus))
    print(
        f"(d) peak memory of a default prepare (one process, local runner): "
        f"{one['peak'] / 1e9:.2f} GB at {mb:.0f} MB of text ({one['wall']:.0f} s), "
        f"{four['peak'] / 1e9:.2f} GB at 4x = {os.path.getsize(big) / 1e6:.0f} MB "
        f"({four['wall']:.0f} s): {slope:.3f} bytes per byte of text; the shuffle moved "
        f"{four['shuffle'] / four['written']:.2f} bytes per byte of shards written "
        f"({four['shuffle'] / 1e6:,.0f} MB for {four['written'] / 1e6:,.0f} MB)"
    )


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus_mb", type=float, default=20)
    parser.add_argument(
        "--workers", type=int, default=0, help="also run with N worker processes (multi_processing)"
    )
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--out", default="bench_out/prepare")
    parser.add_argument("--model", default="unigram")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="concatenate the corpus N times (the docstring corpus tops out "
        "at ~90 MB): shows how fixed start-up costs amortise",
    )
    parser.add_argument(
        "--cleaning",
        default="quality,exact,near",
        help="also time these removal steps, each alone, against a run that "
        "removes nothing ('' = none; with --repeat, exact and near "
        "remove every repeat)",
    )
    parser.add_argument(
        "--memory",
        type=int,
        default=1,
        help="1: also measure peak memory at 1x and 4x the corpus (d)",
    )
    return parser.parse_args(argv)


def make_corpus(args) -> tuple[str, str]:
    """(the corpus benchmarked, the corpus once): written unless already there."""
    corpus = os.path.join(args.out, f"corpus-{args.corpus_mb:g}mb.jsonl")
    if not os.path.exists(corpus):
        demo_corpus.write_corpus(corpus, int(args.corpus_mb * 1e6))
    if args.repeat <= 1:
        return corpus, corpus
    repeated = corpus.replace(".jsonl", f"-x{args.repeat}.jsonl")
    if not os.path.exists(repeated):
        with open(corpus, "rb") as f:
            data = f.read()
        with open(repeated, "wb") as f:
            f.write(data * args.repeat)
    return repeated, corpus


def make_tokenizer(args, base_corpus: str) -> str:
    """The tokenizer folder, trained on `base_corpus` unless already there."""
    tok_dir = os.path.join(args.out, f"tokenizer-{args.model}")
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        train_tokenizer.train(
            train_tokenizer.TokenizerConfig(
                output_dir=tok_dir,
                input=base_corpus,
                model=args.model,
                vocab_size=25000,
                max_documents=20000,
            )
        )
    return tok_dir


IN_PROCESS = "in-process runner, tokenizer threads on all cores"  # the run (c) compares with


def runner_variants(workers: int) -> list[tuple[str, list[str]]]:
    """(label, runner flags) of each pipeline run (b): in-process, and with N workers."""
    variants = [(IN_PROCESS, [])]
    if workers:
        variants.append(
            (
                f"{workers} worker processes",
                ["--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"],
            )
        )
    return variants


def time_trials(args, corpus: str, tok_dir: str, variants, cleaning) -> tuple[int, dict, dict]:
    """(tokens, {label: fastest wall seconds}, {cleaning label: documents removed}) of
    `args.trials` trials, interleaved so noise hits all alike."""
    best, removed = {}, {}
    prepared = os.path.join(args.out, "prepared")
    for _ in range(args.trials):
        tokens, seconds = ceiling(corpus, tok_dir, 1_000_000)
        best["ceiling"] = min(best.get("ceiling", seconds), seconds)
        for label, runner_args in variants:
            wall, _ = run_pipeline(corpus, tok_dir, prepared, runner_args, tokens)
            best[label] = min(best.get(label, wall), wall)
        for label, cleaning_args in cleaning:
            wall, removed[label] = run_pipeline(
                corpus, tok_dir, prepared, [], tokens, cleaning_args
            )
            best[label] = min(best.get(label, wall), wall)
    return tokens, best, removed


def report_throughput(args, mb: float, tokens: int, best: dict, cleaned: dict, removed: dict):
    """Prints (a) the ceiling, (b) each pipeline run against it, (c) each removal step's
    cost against the first run (b); `best` holds the ceiling and (b), `cleaned` (c)."""
    ceiling_s = best.pop("ceiling")
    print(
        f"(a) encode_batch ceiling: {tokens:,} tokens in {ceiling_s:.1f} s = "
        f"{tokens / ceiling_s:,.0f} tokens/s ({mb:.1f} MB, {os.cpu_count()} cores; "
        f"best of {args.trials})"
    )
    for label, wall in best.items():
        print(
            f"(b) prepare pipeline, {label} (wall incl. start-up and writing; best of "
            f"{args.trials}): {tokens:,} tokens in {wall:.1f} s = {tokens / wall:,.0f} "
            f"tokens/s; ratio (b)/(a) = {ceiling_s / wall:.2f}"
        )
    none = best[IN_PROCESS]
    for label, wall in cleaned.items():
        print(
            f"(c) prepare with {label}, in-process (best of {args.trials}): {wall:.1f} s, "
            f"{100 * (wall / none - 1):+.0f} % against removing nothing ({none:.1f} s); "
            f"{removed[label]:,} documents removed"
        )


def main(argv=None) -> int:
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    corpus, base_corpus = make_corpus(args)
    tok_dir = make_tokenizer(args, base_corpus)
    mb = os.path.getsize(corpus) / 1e6
    variants = runner_variants(args.workers)
    cleaning = [CLEANING[name] for name in args.cleaning.split(",") if name]
    tokens, best, removed = time_trials(args, corpus, tok_dir, variants, cleaning)
    cleaned = {label: best.pop(label) for label, _ in cleaning}
    report_throughput(args, mb, tokens, best, cleaned, removed)
    if args.memory:
        report_memory(corpus, tok_dir, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
