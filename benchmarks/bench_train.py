"""Throughput of the trainer: input pipeline alone, train step (tiny, small), and base on a GPU.

    python -m benchmarks.bench_train [--batch 32] [--seq 128] [--vocab 25000]

Prints examples/s of the tf.data pipeline (read, shuffle, batch, vectorised parse) from local
shards, examples/s of the compiled train step (masking + forward + backward + AdamW) for the
tiny and small sizes on this machine, and the ratio (goal: input >= 10x the step). When a GPU
is visible it also trains `base` and prints tokens/s, model FLOPs and MFU.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import trainer  # noqa: F401  (pins KERAS_BACKEND before numpy/TF pull keras in)

import numpy as np
import tensorflow as tf

from common import schema
from trainer import data, model
from trainer.masking import MaskingSpec
from trainer.optimization import build_optimizer
from trainer.train_step import MaskedLMTrainer

SPECIAL = (0, 1, 2, 3, 4)
# Dense bf16 peak of common accelerators, for MFU.
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0,
               "V100": 125.0, "T4": 65.0}


def write_shards(folder, num_shards, per_shard, seq, vocab, seed=0):
    rng = np.random.default_rng(seed)
    for index in range(num_shards):
        with tf.io.TFRecordWriter(f"{folder}/dataset-{index}-{per_shard}.tfrecord") as w:
            for _ in range(per_shard):
                n = int(rng.integers(seq // 2, seq - 1))
                ids = np.zeros(seq, np.int64)
                ids[0], ids[1:n + 1], ids[n + 1] = 2, rng.integers(5, vocab, n), 3
                w.write(schema.encode_example(ids, (ids != 0).astype(np.int64)))


def bench_input(folder, batch, seq, vocab, batches=400):
    class Info:
        vocab_size, fingerprint = vocab, ""

    source = data.resolve_split(folder, Info(), seq)
    dataset = data.train_dataset(source, batch, seed=0, shuffle_buffer=10_000)
    iterator = iter(dataset)
    for _ in range(20):
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)["input_ids"].numpy()
    return batches * batch / (time.perf_counter() - start)


def build(size, vocab, seq, jit, precision="float32"):
    import keras

    keras.mixed_precision.set_dtype_policy(precision)
    keras.utils.set_random_seed(0)
    config = model.backbone_config("roberta", size, vocab, seq)
    masked_lm = model.build_masked_lm("roberta", config)
    trainer_model = MaskedLMTrainer(masked_lm, MaskingSpec(vocab, 4, SPECIAL))
    trainer_model.compile(optimizer=build_optimizer(1e-4, 10_000, 100), jit_compile=jit)
    return trainer_model, masked_lm.count_params()


def bench_step(size, batch, seq, vocab, steps, jit=True, precision="float32"):
    """Examples/s of the train function alone (batches come from memory)."""
    trainer_model, params = build(size, vocab, seq, jit, precision)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocab, (batch, seq)).astype(np.int32)
    ids[:, 0], ids[:, -1] = 2, 3
    batch_data = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    trainer_model(batch_data)
    iterator = iter(tf.data.Dataset.from_tensors(batch_data).repeat())
    trainer_model.optimizer.build(trainer_model.trainable_variables)
    trainer_model.make_train_function()
    train_function = trainer_model.train_function  # what fit calls per step
    for _ in range(3):  # compile + warm up
        float(train_function(iterator)["loss"])
    start = time.perf_counter()
    for _ in range(steps):
        logs = train_function(iterator)
    float(logs["loss"])
    return steps * batch / (time.perf_counter() - start), params


def model_flops_per_token(params, layers, hidden, seq):
    """Training FLOPs per token: 6 * params (matmuls, fwd + bwd) + 12 * layers * hidden * seq
    (attention scores and values). Overstates the LM head, which runs on 15 % of tokens."""
    return 6 * params + 12 * layers * hidden * seq


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=25_000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        write_shards(folder, 8, 2_000, args.seq, args.vocab)
        input_rate = bench_input(folder, args.batch, args.seq, args.vocab)
    print(f"input pipeline: {input_rate:,.0f} examples/s "
          f"(batch {args.batch}, seq {args.seq}, 8 local shards)")

    for size, steps in (("tiny", 30), ("small", 15)):
        rate, params = bench_step(size, args.batch, args.seq, args.vocab, steps)
        print(f"train step {size:5s} ({params / 1e6:.1f} M params, XLA, CPU): "
              f"{rate:,.1f} examples/s = {rate / args.batch:.2f} steps/s; input/step ratio "
              f"{input_rate / rate:,.0f}x {'(goal >= 10x met)' if input_rate >= 10 * rate else '(BELOW 10x)'}")

    base = model.SIZES["base"]
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        _, params = build("base", args.vocab, 512, jit=False)
        flops = model_flops_per_token(params, base["num_layers"], base["hidden_dim"], 512)
        print(f"base: {params / 1e6:.1f} M params, {flops / 1e9:.2f} GFLOPs per training token "
              "at seq 512; no GPU visible, so no MFU measurement.")
        return
    seq, batch = 512, 32
    rate, params = bench_step("base", batch, seq, args.vocab, steps=20,
                              precision="mixed_bfloat16")
    tokens = rate * seq
    flops = model_flops_per_token(params, base["num_layers"], base["hidden_dim"], seq)
    name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
    peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), None)
    achieved = tokens * flops / 1e12
    mfu = f"MFU {100 * achieved / peak:.1f} % of {peak:.0f} TFLOP/s" if peak else "peak unknown"
    print(f"base on {name} (bf16, batch {batch}, seq {seq}): {tokens:,.0f} tokens/s, "
          f"{flops / 1e9:.2f} GFLOPs/token, {achieved:.1f} TFLOP/s, {mfu}")


if __name__ == "__main__":
    main()
