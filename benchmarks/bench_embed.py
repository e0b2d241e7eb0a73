"""Embedding speed on short texts: our length buckets beside padding every batch to the full
length, packed rows (several texts a row: ModernBERT) and sentence-transformers in PyTorch on
our export of the same model, the same texts, batch and length, on this machine, in one run.

    python -m benchmarks.bench_embed --model runs/demo/train --texts runs/demo/corpus.jsonl \\
        [--count 2048] [--batch 32] [--max_length 128] [--steps 30]

The texts are the first `--count` documents of a JSONL corpus (`text` field; the demo's are
docstrings: a realistic mix of one-line and paragraph-long texts), cut to `--max_length`
tokens as the model reads them. Sides, each in its own process (Keras picks its backend once
per process; torch's threads do not compete with XLA's):

- `buckets` / `padded` (Keras, JAX, jitted): `trainer.finetune --task_type embedding`'s code,
  `embedding_data.Encoder` (longest first, batches padded to a bucket of 16, 32, 64, ...) and
  `embedding_step.Trainer` (one contrastive step on pairs of a text's first half and its second
  half); `padded` is the same with a single bucket, `--max_length`.
- `packed` (families with packed rows: ModernBERT): `--packing auto`'s layout
  (`packed_rows.Packed`: the batch's texts several to a row of `--max_length`, read apart by
  document masks, pooled per text); skipped, and said, for the other families.
- `torch`: `SentenceTransformer(export).encode` (it sorts by length and pads each batch to its
  own longest text: the best case for dynamic shapes) at one thread and at its default threads.

Encoding is timed over every text after a first warm pass (the compiles), training over
`--steps` steps after as many warm ones. Printed: texts/s per side and the ratios.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

from common import flags, fs
from common.errors import UserError, run_cli
from common.flags import flag

SIDES = ("buckets", "padded", "packed", "torch", "torch1")


@dataclasses.dataclass(frozen=True)
class BenchFlags:
    model: str = flag(
        "A run folder or export (what trainer.finetune --model takes).", required=True
    )
    texts: str = flag("A JSONL corpus with a `text` field (the demo's).", required=True)
    count: int = flag("Texts encoded per side.", 2048, minimum=64)
    batch: int = flag("Texts per batch (pairs per training step).", 32, minimum=2)
    max_length: int = flag("Tokens per text at most, special tokens included.", 128, minimum=16)
    steps: int = flag("Timed training steps (after as many warm ones); 0: encoding only.", 30)
    sides: str = flag("Comma-separated sides to run.", ",".join(SIDES))
    side: str = flag("Internal: run one side in this process and print its JSON.")
    export: str = flag("Internal: the sentence-transformers export the torch sides read.")


def _texts(path: str, count: int) -> list[str]:
    texts = []
    for line in fs.read_bytes(path).decode("utf-8").splitlines():
        if line.strip():
            text = json.loads(line).get("text", "").strip()
            if text:
                texts.append(text)
        if len(texts) == count:
            break
    if len(texts) < count:
        raise UserError(f"{path} holds {len(texts)} texts, fewer than --count {count}")
    return texts


def _model_and_layout(config: BenchFlags, source, info, side: str):
    """(the embedding model, the layout its batches take) of a Keras side."""
    from trainer.finetuning import embedding_data, packed_rows
    from trainer.models import model_source

    backbone = model_source.load_source(source).backbone
    packed = side == "packed"
    layout = embedding_data.layout(info, config.max_length, source.family, packed)
    if side == "padded":
        layout = packed_rows.Padded(info.pad_id, (config.max_length,), layout.with_segments)
    return embedding_data.model(backbone, source.family, "mean", packed), layout


def _keras_side(config: BenchFlags, side: str) -> dict:
    """Encoding and training texts/s of our code: buckets, one padded length, or packed."""
    import numpy as np

    from common import tokenizer_files
    from trainer.finetuning import embedding_data, embedding_step
    from trainer.models import model_source
    from trainer.training.optimizer import build_optimizer

    source = model_source.resolve(config.model)
    if side == "packed" and source.family.packed_states is None:
        return {"skipped": f"a {source.family.name} model reads one text a row"}
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    model, layout = _model_and_layout(config, source, info, side)
    trainer = embedding_step.Trainer(model, build_optimizer(1e-5, 10_000, 0), None, 0.05, jit=True)
    encode = embedding_data.Encoder(
        trainer.embed, tokenizer, info, config.max_length, layout, config.batch
    )
    texts = _texts(config.texts, config.count)
    found = {"encode": _timed(lambda: encode(texts), len(texts))}
    if config.steps:
        halves = [(t[: len(t) // 2], t[len(t) // 2 :]) for t in texts]
        sides = [
            embedding_data.TextRows.of(tokenizer, info, part, config.max_length).rows
            for part in zip(*halves)
        ]
        batches = [
            tuple(layout.features(list(rows[start : start + config.batch])) for rows in sides)
            for start in range(0, len(texts) - config.batch + 1, config.batch)
        ]

        def train(count):
            for i in range(count):
                trainer.step(*batches[i % len(batches)])

        train(config.steps)  # warm: every bucket pair met once, most likely
        found["train"] = _timed(lambda: train(config.steps), config.steps * config.batch)
    rows = embedding_data.TextRows.of(tokenizer, info, texts, config.max_length).rows
    found["mean_tokens"] = round(float(np.mean([len(row) for row in rows])), 1)
    return found


def _timed(work, items: int) -> float:
    work()  # warm: the compiles
    started = time.perf_counter()
    work()
    return round(items / (time.perf_counter() - started), 1)


def _torch_side(config: BenchFlags, threads: int | None) -> dict:
    import sentence_transformers
    import torch

    if threads:
        torch.set_num_threads(threads)
    model = sentence_transformers.SentenceTransformer(
        config.export, device="cpu", local_files_only=True
    )
    model.max_seq_length = config.max_length
    texts = _texts(config.texts, config.count)
    encode = lambda: model.encode(texts, batch_size=config.batch)  # noqa: E731
    return {"encode": _timed(encode, len(texts))}


def _run_side(config: BenchFlags) -> dict:
    if config.side in ("buckets", "padded", "packed"):
        os.environ["KERAS_BACKEND"] = "jax"
        return _keras_side(config, config.side)
    return _torch_side(config, 1 if config.side == "torch1" else None)


def _child(config: BenchFlags, side: str, export: str) -> dict:
    argv = [sys.executable, "-m", "benchmarks.bench_embed", "--model", config.model,
            "--texts", config.texts, "--count", str(config.count), "--batch", str(config.batch),
            "--max_length", str(config.max_length), "--steps", str(config.steps),
            "--side", side, "--export", export]  # fmt: skip
    env = dict(os.environ, KERAS_BACKEND="jax")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise UserError(f"side {side} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _export(config: BenchFlags, folder: str) -> str:
    from trainer.release import export

    return export.export(config.model, folder, "sentence-transformers", pooling="mean")[
        "sentence-transformers"
    ]


def bench(config: BenchFlags) -> dict:
    sides = [s for s in config.sides.split(",") if s]
    unknown = set(sides) - set(SIDES)
    if unknown:
        raise UserError(f"--sides {sorted(unknown)} not among {SIDES}")
    _texts(config.texts, config.count)  # before any side: one line if too few
    with tempfile.TemporaryDirectory() as tmp:
        folder = (
            _export(config, os.path.join(tmp, "st")) if {"torch", "torch1"} & set(sides) else ""
        )
        return {side: _child(config, side, folder) for side in sides}


def _ratio(found: dict, mine: str, theirs: str) -> str:
    line = f"{mine} / {theirs}: encode {found[mine]['encode'] / found[theirs]['encode']:.2f}x"
    if "train" in found[mine] and "train" in found[theirs]:
        line += f", train {found[mine]['train'] / found[theirs]['train']:.2f}x"
    return line


def report(found: dict) -> str:
    lines = ["side      encode texts/s   train pairs/s"]
    for side, values in found.items():
        if "skipped" in values:
            lines.append(f"{side:<9} skipped: {values['skipped']}")
            continue
        lines.append(f"{side:<9} {values['encode']:>14}   {values.get('train', '-'):>13}")
    ran = {side: values for side, values in found.items() if "skipped" not in values}
    tokens = next((v["mean_tokens"] for v in ran.values() if "mean_tokens" in v), None)
    if tokens is not None:
        lines.append(f"texts: {tokens} tokens on average, special tokens included")
    lines += [
        _ratio(ran, mine, "padded")
        for mine in ("buckets", "packed")
        if {mine, "padded"} <= set(ran)
    ]
    if {"buckets", "packed"} <= set(ran):
        lines.append(_ratio(ran, "packed", "buckets"))
    torch_runs = [ran[s]["encode"] for s in ("torch", "torch1") if s in ran]
    torch_best = max(torch_runs, default=None)
    for mine in ("buckets", "packed"):
        if mine in ran and torch_best:
            lines.append(f"{mine} / sentence-transformers (best threads): encode "
                         f"{ran[mine]['encode'] / torch_best:.2f}x")  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    config = flags.parse(parser, BenchFlags, argv)

    def body():
        if config.side:
            print(json.dumps(_run_side(config)))
            return
        print(report(bench(config)))

    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
