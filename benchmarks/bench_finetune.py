"""Fine-tuning speed: our command's model on each Keras backend beside the Hugging Face export
fine-tuned in PyTorch, the same model, batch, length and steps, on this machine, in one run.

    python -m benchmarks.bench_finetune [--model runs/demo/train] [--batch 32] [--seq 64] \\
        [--steps 40] [--warmup 10] [--backends tensorflow,jax] [--quick]

Keras: the model `trainer.finetune` builds (the family's keras-hub TextClassifier on the
pretrained backbone, head dropout 0.1, AdamW compiled as the command compiles it, XLA as its
`--jit_compile auto` chooses: on JAX, not for TensorFlow on a CPU), `fit` on packed batches
from memory. PyTorch: `trainer.export --format hf` of the same checkpoint, loaded in
`AutoModelForSequenceClassification`, a plain loop (forward, backward, AdamW step) in train
mode. Each side runs in its own process (Keras picks its backend once per process; torch's
threads do not compete with TensorFlow's), warms up for `--warmup` steps (the compile), then
times `--steps`. The batches are random token ids of full length with random labels: the
step's cost does not depend on what the text says.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from common import flags
from common.errors import UserError, run_cli
from common.flags import flag

NUM_LABELS = 8  # the demo's downstream task
# PyTorch twice: at its default threads (one per core) and at one thread. On this shared
# machine (load 7-8 on 2 cores) its two threads ran 7x slower than one (29 vs 211 examples/s,
# OpenMP threads waiting on each other); the ratio is taken against the faster of the two.
SIDES = ("tensorflow", "jax", "torch", "torch1")


@dataclasses.dataclass
class BenchFlags:
    model: str = flag(
        "The pretrained model (a run folder or our keras-hub export), as "
        "trainer.finetune's --model.",
        "runs/demo/train",
    )
    batch: int = flag("Examples per step.", 32, minimum=1)
    seq: int = flag("Tokens per example; default the model's positions.", minimum=8)
    steps: int = flag("Timed steps per side.", 40, minimum=1)
    warmup: int = flag(
        "Untimed steps first (tracing, compiling; JAX was still 25 % slower "
        "after 3 than after 20 here).",
        10,
        minimum=1,
    )
    backends: str = flag(
        "Keras backends to time, comma-separated (torch is always timed).", "tensorflow,jax"
    )
    quick: bool = flag("A smoke run: 2 timed steps after 1 warm-up, batch 4.", False)
    side: str = flag("Internal: time one side in this process and print JSON.", choices=SIDES)

    def __post_init__(self):
        if self.quick:
            self.steps, self.warmup, self.batch = 2, 1, 4
        unknown = set(self.backend_list()) - {"tensorflow", "jax"}
        if unknown:
            raise ValueError(f"--backends takes tensorflow and jax, not {sorted(unknown)}")

    def backend_list(self) -> list[str]:
        return [b.strip() for b in self.backends.split(",") if b.strip()]


def random_batch(vocab: int, batch: int, seq: int, seed: int = 0) -> tuple:
    """(ids, labels): full-length rows of random ids from 5 up, past every special token (the
    pad id never occurs: HF RoBERTa derives positions from it)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, (batch, seq)).astype(np.int32)
    return ids, rng.integers(0, NUM_LABELS, batch).astype(np.int32)


def time_keras(config: BenchFlags) -> dict:
    """Examples/s of the Keras fine-tuning step, as trainer.finetune builds and compiles it."""
    import keras

    from trainer.finetuning import classifier
    from trainer.models import model_source

    source = model_source.resolve(config.model)
    backbone = classifier.PretrainedBackbone(source)
    model = backbone.classifier(NUM_LABELS, seed=1)
    jit = classifier.jit_default("auto")
    total = config.warmup + config.steps
    classifier.compile_for(model, "classification", 1e-3, total, 0, 0.01, jit)
    seq = config.seq or source.max_sequence_length
    ids, labels = random_batch(backbone.vocabulary_size, config.batch, seq)
    features = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    if source.family.takes_segment_ids:
        features["segment_ids"] = np.zeros_like(ids)

    def fit(steps):
        repeat = {k: np.tile(v, (steps, 1)) for k, v in features.items()}
        model.fit(
            repeat,
            np.tile(labels, steps),
            batch_size=config.batch,
            epochs=1,
            shuffle=False,
            verbose=0,
        )

    fit(config.warmup)
    start = time.perf_counter()
    fit(config.steps)
    seconds = time.perf_counter() - start
    return {
        "side": keras.backend.backend(),
        "jit_compile": jit,
        "seq": seq,
        "examples_per_second": config.steps * config.batch / seconds,
        "parameters": int(model.count_params()),
    }


def time_torch(config: BenchFlags) -> dict:
    """Examples/s of fine-tuning our HF export in PyTorch (AdamW, train mode)."""
    import torch
    import transformers

    from trainer.models import model_source
    from trainer.release import export

    if config.side == "torch1":
        torch.set_num_threads(1)

    source = model_source.resolve(config.model)
    with tempfile.TemporaryDirectory() as folder:
        path = export.export(config.model, os.path.join(folder, "hf"), "hf")["hf"]
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=NUM_LABELS
        )
    seq = config.seq or source.max_sequence_length
    vocab = int(source.record.backbone_config["vocabulary_size"])
    ids, labels = random_batch(vocab, config.batch, seq)
    inputs = {
        "input_ids": torch.tensor(ids, dtype=torch.long),
        "attention_mask": torch.ones(ids.shape, dtype=torch.long),
        "labels": torch.tensor(labels, dtype=torch.long),
    }
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    model.train()

    def step():
        model(**inputs).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # as our AdamW clips
        optimizer.step()
        optimizer.zero_grad()

    for _ in range(config.warmup):
        step()
    start = time.perf_counter()
    for _ in range(config.steps):
        step()
    seconds = time.perf_counter() - start
    return {
        "side": config.side or "torch",
        "threads": torch.get_num_threads(),
        "seq": seq,
        "examples_per_second": config.steps * config.batch / seconds,
        "parameters": int(sum(p.numel() for p in model.parameters())),
    }


def run_side(side: str, argv: list[str]) -> dict:
    """One side in a child process (its own backend, its own threads)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if not side.startswith("torch"):
        env["KERAS_BACKEND"] = side
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_finetune", *argv, "--side", side],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise UserError(f"the {side} side failed (exit {done.returncode}): {tail[0]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(config: BenchFlags, results: dict) -> list[str]:
    torch_rate = max(
        r["examples_per_second"] for r in results.values() if r["side"].startswith("torch")
    )
    seq = results["torch"]["seq"]
    lines = [
        f"fine-tuning {config.model}: batch {config.batch}, seq {seq}, {NUM_LABELS} labels, "
        f"{config.steps} timed steps after {config.warmup}, this machine's CPU"
    ]
    for side, result in results.items():
        what = (
            "PyTorch, our HF export (AutoModelForSequenceClassification, "
            f"{result.get('threads')} thread(s))"
            if side.startswith("torch")
            else f"Keras {side}, trainer.finetune's model (jit_compile {result['jit_compile']})"
        )
        ratio = result["examples_per_second"] / torch_rate
        lines.append(
            f"  {what:78s} {result['examples_per_second']:8.1f} examples/s  {ratio:5.2f}x PyTorch"
        )
    return lines + ["  (the ratio is to the faster PyTorch line)"]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    config = flags.parse(parser, BenchFlags, argv)

    def body():
        if config.side:  # a child: one side, JSON on the last line
            timed = time_torch(config) if config.side.startswith("torch") else time_keras(config)
            print(json.dumps(timed))
            return 0
        from trainer.models import model_source

        source = model_source.resolve(config.model)  # a missing model: one line, no child
        if config.seq and config.seq > source.max_sequence_length:
            raise UserError(
                f"--seq {config.seq} is more than the model's "
                f"{source.max_sequence_length} positions"
            )
        sides = (*config.backend_list(), "torch", "torch1")
        results = {side: run_side(side, argv) for side in sides}
        print("\n".join(report(config, results)))
        return 0

    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
