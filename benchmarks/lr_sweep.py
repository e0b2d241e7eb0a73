"""The learning-rate sweep behind the per-size `--learning_rate` defaults (docs/training.md,
"Learning rate").

    python -m benchmarks.lr_sweep --data runs/demo/prepared --tokenizer runs/demo/tokenizer \\
        --runs tiny:3e-4,1e-3,2e-3,5e-3 small:3e-4,1e-3,2e-3 --steps 600 [--batch 32]

Trains each (size, rate) for the same number of steps on the same data (the trainer's own
command, one process each, default warmup) and prints a table of final eval loss and masked
accuracy. Accuracy per step does not depend on how busy the machine is, so the table is
comparable across machines; the seconds column is not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from common import flags


def train(
    data: str, tokenizer: str, size: str, rate: str, steps: int, batch: int, extra: list[str]
) -> dict:
    with tempfile.TemporaryDirectory(prefix="lr-sweep-") as out:
        start = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "trainer.task",
                "--train_data",
                f"{data}/train",
                "--eval_data",
                f"{data}/validation",
                "--tokenizer",
                tokenizer,
                "--output_dir",
                out,
                "--model",
                size,
                "--strategy",
                "cpu",
                "--per_replica_batch_size",
                str(batch),
                "--train_steps",
                str(steps),
                "--eval_every",
                str(steps),
                "--save_every",
                str(steps),
                "--learning_rate",
                rate,
                "--max_eval_batches",
                "20",
                "--verbose",
                "0",
                *extra,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with open(os.path.join(out, "metrics.json")) as f:
            metrics = json.load(f)
    return metrics | {"seconds": time.monotonic() - start}


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="prepare's output folder")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--runs", nargs="+", required=True, help="SIZE:RATE,RATE,...")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--extra", default="", help="more trainer flags, space-separated")
    args = parser.parse_args(argv)
    print(
        f"| size | learning rate | eval loss | eval masked accuracy | seconds |  "
        f"({args.steps} steps, batch {args.batch}, {args.data})"
    )
    print("|---|---|---|---|---|")
    for run in args.runs:
        size, _, rates = run.partition(":")
        for rate in rates.split(","):
            m = train(
                args.data, args.tokenizer, size, rate, args.steps, args.batch, args.extra.split()
            )
            print(
                f"| {size} | {rate} | {m['eval_loss']:.3f} | {100 * m['eval_accuracy']:.1f} % "
                f"| {m['seconds']:.0f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
