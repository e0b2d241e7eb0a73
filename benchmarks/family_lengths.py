"""How the compiled train step's time grows with the sequence length, RoBERTa beside ModernBERT.

    KERAS_BACKEND=jax python -m benchmarks.family_lengths [--size tiny] [--lengths 128,512,2048]
        [--batch_tokens 8192] [--rounds 3] [--steps 2]

For each family and length, builds our MaskedLMTrainer (float32, the masking rate of the
family's recipe: RoBERTa 15 %, ModernBERT 30 %) and times Keras' own jitted train step
(masking, forward, backward, AdamW) on one batch of packed documents
(benchmarks/accel/synthetic.py: ModernBERT keeps them apart, RoBERTa attends across them), the
same tokens per batch at every length.
The variants run in turn, `--rounds` times, so a busy machine slows all of them alike within
a round. Prints each one's median ms per step, its ratio to the shortest length, and the ratio
of the model FLOPs counted for it (the record's `flops_per_token`, trainer/families/flops.py):
a step that grows faster than its FLOPs spends the difference outside the counted products.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from benchmarks import accel_paths
from benchmarks.accel import synthetic
from trainer import families
from trainer.models import model

# The families compared, the last column dividing the second's step time by the first's.
FAMILIES = ("roberta", "modernbert")


def _lengths(text: str) -> list[int]:
    try:
        lengths = [int(n) for n in text.split(",")]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 2:
        raise argparse.ArgumentTypeError(f"want lengths such as 128,512,2048, not {text!r}")
    return lengths


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny", choices=("tiny", "small", "base"))
    parser.add_argument("--lengths", type=_lengths, default=[128, 512, 2048])
    parser.add_argument("--batch_tokens", type=int, default=8192, help="tokens per batch")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--steps", type=int, default=2, help="steps per variant per round")
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args(argv)


def build(args) -> dict:
    """{(family, length): [step, state, data]} of fresh models, each compiled by one step."""
    built = {}
    for length in args.lengths:
        batch = _batch(args, length)
        rng = np.random.default_rng(0)
        ids = synthetic.packed_rows(rng, batch, length, args.vocab, max(8, length // 4))
        for family in FAMILIES:
            rate = families.get(family).recipe_value("mlm_probability")
            shape = accel_paths.Shape(args.size, length, batch, args.vocab, family, rate=rate)
            step, state, data = accel_paths.compiled_step(shape, "float32", False, ids)
            state = accel_paths.time_steps(step, state, data, 1)[1]  # compiles
            built[family, length] = [step, state, data]
    return built


def measure(args) -> dict:
    """{(family, length): median seconds per step over the rounds}."""
    built = build(args)
    seconds = {key: [] for key in built}
    for _ in range(args.rounds):
        for key, (step, state, data) in built.items():
            spent, built[key][1] = accel_paths.time_steps(step, state, data, args.steps)
            seconds[key].append(spent)
    return {key: statistics.median(values) for key, values in seconds.items()}


def _batch(args, length: int) -> int:
    return max(1, args.batch_tokens // length)


def step_flops(args, family: str, length: int) -> float:
    """Model FLOPs of one step (the record's per token, x tokens per batch)."""
    tokens = _batch(args, length) * length
    record = families.get(family)  # a name enters: one of FAMILIES
    config = model.backbone_config(record, args.size, args.vocab, length)
    return tokens * record.flops_per_token(config, length)


def table(args, medians: dict) -> list[str]:
    first = args.lengths[0]
    lines = [
        f"{args.size}, {args.batch_tokens} tokens per batch, vocab {args.vocab}, float32: "
        f"median ms per step of {args.rounds} rounds x {args.steps} steps; x{first}: the "
        f"ratio to length {first}, measured (counted model FLOPs per step)",
        f"{'length':>6s}{'batch':>6s} | "
        + " | ".join(
            f"{family + ' ms':>13s}  {'x' + str(first) + ' (FLOPs)':>13s}" for family in FAMILIES
        )
        + f" | {FAMILIES[1]} / {FAMILIES[0]}",
    ]
    for length in args.lengths:
        cells = []
        for family in FAMILIES:
            counted = step_flops(args, family, length) / step_flops(args, family, first)
            ms = 1000 * medians[family, length]
            grown = medians[family, length] / medians[family, first]
            cells.append(f"{ms:13.1f}  {grown:5.2f} ({counted:5.2f})")
        ratio = medians[FAMILIES[1], length] / medians[FAMILIES[0], length]
        lines.append(
            f"{length:6d}{_batch(args, length):6d} | " + " | ".join(cells) + f" | {ratio:9.2f}"
        )
    return lines


def main(argv=None) -> None:
    args = parse(argv)
    print("\n".join(table(args, measure(args))))


if __name__ == "__main__":
    main()
