"""The accelerator defaults' effect on this machine's compiled JAX train step, A against B.

    KERAS_BACKEND=jax python -m benchmarks.accel_paths [--size small] [--length 128] [--batch 16]

Builds our MaskedLMTrainer once per variant (float32; mixed_bfloat16; float32 with fused
attention), then times Keras' own jitted train step (masking, forward, backward, AdamW) on
one batch, the variants in turn, `--rounds` times: a busy machine slows all variants alike
within a round. Prints each variant's median ms per step against float32's.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import keras
import numpy as np

from common import schema
from trainer import families
from trainer.data.masking import MaskingSpec
from trainer.models import model
from trainer.pretraining.train_step import ROW, STEP, MaskedLMTrainer
from trainer.training.optimizer import build_optimizer

# The ids of benchmarks/accel/synthetic.py's WordPiece specials (a family whose backbone
# takes one, ModernBERT's document separator, gets it from here).
SPECIAL_IDS = {"pad_token": 0, "unk_token": 1, "cls_token": 2, "sep_token": 3, "mask_token": 4}
VARIANTS = {
    "fp32": ("float32", False),
    "bf16": ("mixed_bfloat16", False),
    "fp32 + fused attention": ("float32", True),
}


@dataclasses.dataclass(frozen=True)
class Shape:
    """A model and batch to time: size, sequence length, batch, vocabulary, family, backbone
    overrides and masking rate."""

    size: str
    length: int
    batch: int
    vocab: int
    family: str = "roberta"
    overrides: dict | None = None
    rate: float = 0.15


def compiled_step(shape: Shape, policy: str, fused: bool, ids=None):
    """(Keras' jitted train step, its state, a batch) of a fresh model. `ids`: the batch's
    token ids (default random words, one document per row)."""
    size, length, batch, vocab = shape.size, shape.length, shape.batch, shape.vocab
    family = families.get(shape.family)  # the shape names its family: a name enters here
    overrides, rate = shape.overrides, shape.rate
    keras.mixed_precision.set_dtype_policy(policy)
    keras.utils.set_random_seed(0)
    config = model.backbone_config(family, size, vocab, length, overrides, SPECIAL_IDS)
    masked_lm = model.build_masked_lm(family, config)
    model.bf16_lm_head(masked_lm)
    if fused:
        model.fuse_attention(masked_lm)
    spec = MaskingSpec(vocab, 4, tuple(SPECIAL_IDS.values()), rate=rate)
    trainer_model = MaskedLMTrainer(masked_lm, spec)
    if ids is None:
        ids = np.random.default_rng(0).integers(5, vocab, (batch, length))
    ids = np.asarray(ids, "int32")
    data = {
        schema.INPUT_IDS: ids,
        schema.ATTENTION_MASK: np.ones_like(ids),
        STEP: np.zeros(batch, "int32"),
        ROW: np.arange(batch, dtype="int32"),
    }
    trainer_model(data)
    trainer_model.compile(optimizer=build_optimizer(1e-4, 1000, 10), jit_compile=True)
    trainer_model.optimizer.build(trainer_model.trainable_variables)
    trainer_model.make_train_function()
    cells = [c.cell_contents for c in trainer_model.train_function.__closure__ or ()]
    step = next(c for c in cells if hasattr(c, "lower"))  # jax.jit(train_step)
    state = trainer_model._get_jax_state(
        trainable_variables=True,
        non_trainable_variables=True,
        optimizer_variables=True,
        metrics_variables=True,
    )
    keras.mixed_precision.set_dtype_policy("float32")
    return step, state, data


def attention_kernel(length: int = 128, family: str = "roberta") -> str:
    """Which attention XLA compiled into a `base`-shaped step (head size 64) in bf16 with
    fused attention, one layer (ModernBERT: two, a global and a local one): cuDNN's fused
    kernel (`__cudnn$fmha` custom calls, forward and backward) or not. Keras picks cuDNN
    when it can and falls back to XLA without a word otherwise."""
    layers = {"num_layers": layers_of_each_kind(family, length)}
    shape = Shape("base", length, 2, 1000, family, layers)
    step, state, data = compiled_step(shape, "mixed_bfloat16", True)
    text = step.lower(state, data).compile().as_text().lower()
    calls = sum("cudnn$fmha" in line for line in text.splitlines())
    return (
        f"cuDNN fused attention ({calls} fused-attention calls in the compiled step)"
        if calls
        else "XLA attention (no cuDNN fused-attention call in the compiled step)"
    )


def layers_of_each_kind(family: str, length: int) -> int:
    """The fewest first layers of a `base` model that hold each kind of attention layer the
    family's record lays out (`attention_windows`): one where every layer attends the whole
    row; ModernBERT's two, a global and a local one."""
    record = families.get(family)
    windows = record.attention_windows(model.backbone_config(record, "base", 1000, length))
    return max(windows.index(window) for window in set(windows)) + 1


def time_steps(step, state, data, steps: int):
    """(seconds per step, the new state): the state is donated, so each call's output
    feeds the next."""
    start = time.perf_counter()
    for _ in range(steps):
        logs, state = step(state, data)
    float(logs["loss"])  # waits for the last step
    return (time.perf_counter() - start) / steps, state


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small")
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    built = {
        name: list(compiled_step(Shape(args.size, args.length, args.batch, args.vocab), *how))
        for name, how in VARIANTS.items()
    }
    seconds = {name: [] for name in VARIANTS}
    for name, (step, state, data) in built.items():  # compiles
        built[name][1] = time_steps(step, state, data, 1)[1]
    for _ in range(args.rounds):
        for name, (step, state, data) in built.items():
            spent, built[name][1] = time_steps(step, state, data, args.steps)
            seconds[name].append(spent)
    base = statistics.median(seconds["fp32"])
    print(
        f"{args.size}, length {args.length}, batch {args.batch}, vocab {args.vocab}: "
        f"median ms per step of {args.rounds} rounds x {args.steps} steps"
    )
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"  {name:24s}{1000 * median:9.1f} ms  {base / median:5.2f}x float32's speed")


if __name__ == "__main__":
    main()
