"""Throughput of the trainer on both Keras backends, side by side, in one run.

    python -m benchmarks.bench_train [--batch 32] [--seq 128] [--vocab 25000]
        [--backends tensorflow,jax]

For each backend (one child process each: Keras picks its backend once per process) prints
examples/s of the compiled train step (masking + forward + backward + AdamW, batches from
memory, through `fit`) for the tiny and small sizes, then the JAX/TensorFlow ratio. Also each
backend's input pipeline alone (read, shuffle, batch, vectorised parse: tf.data for TensorFlow,
grain without TensorFlow for JAX; the same batches) in batches/s, and its ratio to that
backend's step rate (the input should run at least 10x the step). When an
accelerator is visible the child also trains `base` in bf16 and prints tokens/s, model FLOPs
and MFU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from common import schema
from trainer import families
from trainer.data import splits as data
from trainer.data.masking import MaskingSpec
from trainer.families.sizes import SIZES
from trainer.models import model
from trainer.pretraining.train_step import MaskedLMTrainer
from trainer.training.optimizer import build_optimizer

SPECIAL = (0, 1, 2, 3, 4)
# Dense bf16 peak of common accelerators, for MFU.
PEAK_TFLOPS = {
    "H100": 989.0,
    "H200": 989.0,
    "A100": 312.0,
    "L4": 121.0,
    "A10": 125.0,
    "V100": 125.0,
    "T4": 65.0,
    "TPU v5 lite": 197.0,
    "TPU v4": 275.0,
    "TPU v6": 918.0,
}


def write_shards(folder, num_shards, per_shard, seq, vocab, seed=0):
    rng = np.random.default_rng(seed)
    for index in range(num_shards):
        with tf.io.TFRecordWriter(f"{folder}/dataset-{index}-{per_shard}.tfrecord") as w:
            for _ in range(per_shard):
                n = int(rng.integers(seq // 2, seq - 1))
                ids = np.zeros(seq, np.int64)
                ids[0], ids[1 : n + 1], ids[n + 1] = 2, rng.integers(5, vocab, n), 3
                w.write(schema.encode_example(ids, (ids != 0).astype(np.int64)))


def bench_input(batch, seq, vocab, batches=400) -> dict:
    """Batches/s of each input pipeline (`data.TF_DATA`, `data.GRAIN`) on 8 local shards."""

    class Info:
        vocab_size, fingerprint = vocab, ""

    rates = {}
    with tempfile.TemporaryDirectory() as folder:
        write_shards(folder, 8, 2_000, seq, vocab)
        source = data.resolve_split(folder, Info(), seq)
        for pipeline in (data.TF_DATA, data.GRAIN):
            iterator = iter(
                data.train_dataset(
                    source,
                    batch,
                    seed=0,
                    shuffle_buffer=10_000,
                    share=data.PipelineShare(pipeline=pipeline),
                )
            )
            for _ in range(20):
                next(iterator)
            start = time.perf_counter()
            for _ in range(batches):
                np.asarray(next(iterator)[schema.INPUT_IDS])
            rates[pipeline] = batches / (time.perf_counter() - start)
    return rates


class _Timer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds = time.perf_counter() - self.start


def bench_step(size, batch, seq, vocab, steps, precision="float32"):
    """Examples/s of `fit` on batches from memory: the last of three epochs (the first
    compiles; JAX's second was still measured slow here, so it is left out too)."""
    keras.mixed_precision.set_dtype_policy(precision)
    keras.utils.set_random_seed(0)
    roberta = families.get("roberta")  # the family this benchmark measures: a name enters
    masked_lm = model.build_masked_lm(roberta, model.backbone_config(roberta, size, vocab, seq))
    trainer_model = MaskedLMTrainer(masked_lm, MaskingSpec(vocab, 4, SPECIAL))
    trainer_model.compile(optimizer=build_optimizer(1e-4, 10_000, 100), jit_compile=True)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocab, (batch, seq)).astype(np.int32)
    ids[:, 0], ids[:, -1] = 2, 3
    batches = (
        tf.data.Dataset.from_tensors(
            {
                schema.INPUT_IDS: ids,
                schema.ATTENTION_MASK: np.ones_like(ids),
                data.ROW: np.arange(batch, dtype=np.int32),
            }
        )
        .repeat()
        .enumerate()
        .map(lambda i, b: {**b, data.STEP: tf.fill([batch], tf.cast(i, tf.int32))})
    )
    timer = _Timer()
    trainer_model.fit(batches, epochs=3, steps_per_epoch=steps, callbacks=[timer], verbose=0)
    return steps * batch / timer.seconds, masked_lm.count_params()


def model_flops_per_token(params, layers, hidden, seq):
    """Training FLOPs per token: 6 * params (matmuls, fwd + bwd) + 12 * layers * hidden * seq
    (attention scores and values). Overstates the LM head, which runs on 15 % of tokens."""
    return 6 * params + 12 * layers * hidden * seq


def accelerator() -> str | None:
    """The name of a visible GPU/TPU on this backend, or None."""
    if keras.backend.backend() == "jax":
        import jax

        device = jax.devices()[0]
        return None if device.platform == "cpu" else device.device_kind
    gpus = tf.config.list_physical_devices("GPU")
    return (
        tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
        if gpus
        else None
    )


def child(args) -> dict:
    """This process's backend: tiny and small on the CPU (or the accelerator), base + MFU
    where an accelerator is visible."""
    out = {"backend": keras.backend.backend(), "device": accelerator() or "CPU"}
    for size, steps in (("tiny", args.tiny_steps), ("small", args.small_steps)):
        rate, params = bench_step(size, args.batch, args.seq, args.vocab, steps)
        out[size] = {"examples_per_second": rate, "params": params}
    if accelerator():
        seq, batch, base = 512, 32, SIZES["base"]
        rate, params = bench_step("base", batch, seq, args.vocab, 20, "mixed_bfloat16")
        flops = model_flops_per_token(params, base["num_layers"], base["hidden_dim"], seq)
        peak = next((v for k, v in PEAK_TFLOPS.items() if k in out["device"]), None)
        achieved = rate * seq * flops / 1e12
        out["base"] = {
            "tokens_per_second": rate * seq,
            "tflops": achieved,
            "mfu": achieved / peak if peak else None,
        }
    return out


def _run_child(backend: str, argv: list[str]) -> dict:
    env = {**os.environ, "KERAS_BACKEND": backend}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_train", "--child", *argv],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{backend} benchmark failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


_PIPELINE = {"tensorflow": data.TF_DATA, "jax": data.GRAIN}  # each backend's input


def report_input(args, results: dict, input_rates: dict) -> None:
    """Each backend's input rate in batches/s beside its step rate (steps/s = batches/s)."""
    print(
        f"input pipeline, batches/s (batch {args.batch}, seq {args.seq}, 8 local shards): "
        + ", ".join(
            f"{p} {r:,.0f} ({r * args.batch:,.0f} examples/s)" for p, r in input_rates.items()
        )
    )
    for name in results:
        rate = input_rates[_PIPELINE[name]]
        ratios = ", ".join(
            f"{size} {rate * args.batch / results[name][size]['examples_per_second']:,.0f}x"
            for size in ("tiny", "small")
        )
        print(f"  {name} backend: {_PIPELINE[name]} input / step rate: {ratios} (>= 10x asked)")


def report(args, results: dict, input_rates: dict) -> None:
    report_input(args, results, input_rates)
    print(
        f"train step, examples/s (batch {args.batch}, seq {args.seq}, vocab {args.vocab}, "
        f"compiled, device {next(iter(results.values()))['device']}):"
    )
    names = list(results)
    print(
        f"  {'size':6s}"
        + "".join(f"{n:>12s}" for n in names)
        + ("   jax/tensorflow" if set(names) == {"jax", "tensorflow"} else "")
    )
    for size in ("tiny", "small"):
        rates = {n: results[n][size]["examples_per_second"] for n in names}
        ratio = (
            f"   {rates['jax'] / rates['tensorflow']:.2f}x"
            if set(names) == {"jax", "tensorflow"}
            else ""
        )
        print(f"  {size:6s}" + "".join(f"{rates[n]:12,.1f}" for n in names) + ratio)
    for name in names:
        base = results[name].get("base")
        if base:
            mfu = f"MFU {100 * base['mfu']:.1f} %" if base["mfu"] else "peak unknown"
            print(
                f"  base on {results[name]['device']} ({name}, bf16, batch 32, seq 512): "
                f"{base['tokens_per_second']:,.0f} tokens/s, {base['tflops']:.1f} TFLOP/s, "
                f"{mfu}"
            )
        else:
            print(f"  base ({name}): no accelerator visible, so no MFU measurement.")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=25_000)
    parser.add_argument("--tiny_steps", type=int, default=30)
    parser.add_argument("--small_steps", type=int, default=15)
    parser.add_argument("--backends", default="tensorflow,jax")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    forwarded = [
        f"--{k}={getattr(args, k)}" for k in ("batch", "seq", "vocab", "tiny_steps", "small_steps")
    ]
    results = {b: _run_child(b, forwarded) for b in args.backends.split(",")}
    report(args, results, bench_input(args.batch, args.seq, args.vocab))


if __name__ == "__main__":
    main()
