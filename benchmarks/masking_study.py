"""The masking study behind the pretraining defaults (docs/finetuning.md,
"Masking recipe, measured"): each masking variant pretrained for the same number of steps with
`make demo`'s recipe, then fine-tuned on the demo's downstream task with the same seeds.

    python -m benchmarks.masking_study --data runs/study/prepared \\
        --tokenizer runs/study/tokenizer-3000 --task runs/study/task \\
        --output_dir runs/study/variants --steps 4000 \\
        --variants token:0.15,token:0.3,whole_word:0.15

Needs the demo's prepared data, tokenizer and task (the first commands of `make demo`). Each
variant is `MODE:RATE` (`--masking`, `--mlm_probability`); its pretraining run goes to
`OUTPUT_DIR/MODE-PERCENT/train`, its fine-tune to `.../finetune`. A run whose metrics.json
already holds `--steps` steps, and a fine-tune whose results.json exists, are reused; an
interrupted run resumes (the trainer's own restart), so a stopped study goes on where it
stopped. A finished run of another step count is refused (resuming it would keep its own
learning-rate schedule): another `--steps` needs another `--output_dir`. The table is printed
and written to `OUTPUT_DIR/table.md`.

Masked accuracy and eval loss are each measured with the variant's own masking (rate and mode):
a model that must fill 30 % of the tokens, or whole words, faces a harder question than one
that fills 15 % of single tokens, so these columns compare training health, not variants. The
downstream score is the comparison.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time

from common import flags, fs
from common.errors import UserError, run_cli
from common.flags import flag

# Owned by trainer/data/masking.py (MODES); repeated here so that `--help` and a bad variant answer
# without importing Keras. tests/test_masking_study.py checks that the two agree.
MODES = ("token", "whole_word", "span")

# `make demo`'s pretraining recipe (Makefile, target demo) and its fine-tuning recipe (DEMO_FT).
PRETRAIN = [
    "--model",
    "tiny",
    "--config",
    '{"dropout": 0.0}',
    "--strategy",
    "cpu",
    "--per_replica_batch_size",
    "32",
    "--learning_rate",
    "3e-3",
    "--warmup_ratio",
    "0.1",
    "--max_eval_batches",
    "20",
]
FINETUNE = ["--metric", "macro_f1", "--batch_size", "32", "--learning_rate", "1e-3"]


@dataclasses.dataclass
class StudyFlags:
    data: str = flag("prepare's output folder (train/ and validation/).", required=True)
    tokenizer: str = flag("The tokenizer folder the data was prepared with.", required=True)
    task: str = flag("benchmarks.demo_task build's folder (train.jsonl, dev.jsonl).", required=True)
    output_dir: str = flag("One folder per variant goes here, and table.md.", required=True)
    variants: str = flag(
        "Comma-separated MODE:RATE pairs, the first is the reference.",
        "token:0.15,token:0.3,whole_word:0.15",
    )
    steps: int = flag(
        "Pretraining steps of every variant (make demo's 4,000: at 2,000 the demo's "
        "model had barely left the MLM plateau and fine-tuned no better than "
        "random weights).",
        4000,
        minimum=1,
    )
    seeds: str = flag("Fine-tuning seeds (comma-separated), the same for every variant.", "1,2")
    epochs: int = flag("Fine-tuning epochs.", 3, minimum=1)


@dataclasses.dataclass(frozen=True)
class Variant:
    mode: str
    rate: float

    @property
    def name(self) -> str:
        return f"{self.mode}-{round(100 * self.rate):g}"


def parse_variants(text: str) -> list[Variant]:
    """`token:0.15,whole_word:0.3` -> variants; a bad one is a UserError naming it."""
    variants = []
    for item in (part.strip() for part in text.split(",")):
        mode, _, rate = item.partition(":")
        if mode not in MODES:
            raise UserError(f"--variants: {item!r}: the mode must be one of {', '.join(MODES)}")
        try:
            value = float(rate)
        except ValueError:
            raise UserError(
                f"--variants: {item!r}: the rate must be a number, as token:0.15"
            ) from None
        if not 0.0 < value < 1.0:
            raise UserError(f"--variants: {item!r}: the rate must be above 0 and below 1")
        variants.append(Variant(mode, value))
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise UserError(f"--variants: a variant is named twice ({', '.join(names)})")
    return variants


def _run(argv: list[str], log: str) -> None:
    with open(log, "w") as out:
        done = subprocess.run([sys.executable, "-m", *argv], stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        raise UserError(f"{' '.join(argv[:1])} failed (exit {done.returncode}); see {log}")


def _json(path: str) -> dict | None:
    return json.loads(fs.read_bytes(path).decode("utf-8")) if fs.exists(path) else None


def pretrain(config: StudyFlags, variant: Variant, folder: str) -> dict:
    """The variant's pretraining run (reused when it already has `steps` steps)."""
    train = os.path.join(folder, "train")
    metrics = _json(os.path.join(train, "metrics.json"))
    if metrics and metrics.get("steps") == config.steps:
        return metrics | {"seconds": None}
    if metrics:  # the trainer would resume it, with the learning-rate schedule of its steps
        raise UserError(
            f"{train} holds a {metrics.get('steps')}-step run, not --steps "
            f"{config.steps}: give another --output_dir"
        )
    start = time.monotonic()
    every = str(min(500, config.steps))
    _run(
        [
            "trainer.task",
            "--train_data",
            f"{config.data}/train",
            "--eval_data",
            f"{config.data}/validation",
            "--tokenizer",
            config.tokenizer,
            "--output_dir",
            train,
            *PRETRAIN,
            "--train_steps",
            str(config.steps),
            "--masking",
            variant.mode,
            "--mlm_probability",
            repr(variant.rate),
            "--eval_every",
            every,
            "--save_every",
            every,
            "--verbose",
            "2",
        ],
        os.path.join(folder, "pretrain.log"),
    )
    return _json(os.path.join(train, "metrics.json")) | {"seconds": time.monotonic() - start}


def finetune(config: StudyFlags, folder: str) -> dict:
    """The variant's fine-tune on the task, every seed (reused when results.json exists)."""
    out = os.path.join(folder, "finetune")
    results = _json(os.path.join(out, "results.json"))
    if results is None:
        _run(
            [
                "trainer.finetune",
                "--model",
                os.path.join(folder, "train"),
                "--train",
                f"{config.task}/train.jsonl",
                "--dev",
                f"{config.task}/dev.jsonl",
                *FINETUNE,
                "--seeds",
                config.seeds,
                "--epochs",
                str(config.epochs),
                "--output_dir",
                out,
            ],
            os.path.join(folder, "finetune.log"),
        )
        results = _json(os.path.join(out, "results.json"))
    return results


def row(variant: Variant, metrics: dict, results: dict) -> dict:
    """What the table shows of one variant."""
    metric = results["scores"]["metric"]
    per_seed = [seed["dev"][metric] for seed in results["scores"]["seeds"]]
    return {
        "variant": variant.name,
        "mode": variant.mode,
        "rate": variant.rate,
        "steps": metrics["steps"],
        "eval_loss": metrics["eval_loss"],
        "masked_accuracy": metrics["eval_accuracy"],
        "metric": metric,
        "per_seed": per_seed,
        "mean": statistics.fmean(per_seed),
        "std": statistics.stdev(per_seed) if len(per_seed) > 1 else 0.0,
        "collapsed": len(results["scores"]["summary"]["collapsed_seeds"]),
    }


def table(rows: list[dict]) -> str:
    """A markdown table; the last column is the mean's distance from the first variant's in
    units of the larger of the two seed spreads (how far beyond the noise it lies)."""
    first = rows[0]
    lines = [
        f"| variant (mode, rate) | steps | eval loss* | masked accuracy* "
        f"| dev {first['metric']} mean ± std | per seed | Δ vs first | Δ / spread |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        delta = r["mean"] - first["mean"]
        spread = max(r["std"], first["std"])
        ratio = "—" if r is first else (f"{delta / spread:+.1f}" if spread else "n/a")
        collapsed = f", {r['collapsed']} collapsed" if r["collapsed"] else ""
        lines.append(
            f"| {r['mode']} {100 * r['rate']:g} % | {r['steps']} "
            f"| {r['eval_loss']:.3f} | {100 * r['masked_accuracy']:.1f} % "
            f"| {r['mean']:.3f} ± {r['std']:.3f}"
            f"{collapsed} | {', '.join(f'{v:.3f}' for v in r['per_seed'])} "
            f"| {'—' if r is first else f'{delta:+.3f}'} | {ratio} |"
        )
    lines.append(
        "\n*measured with each variant's own masking: not comparable across rates or "
        "modes (a harder question, not a worse model); the downstream score compares."
    )
    return "\n".join(lines)


def study(config: StudyFlags) -> str:
    variants = parse_variants(config.variants)
    for part in (
        f"{config.data}/train",
        f"{config.tokenizer}/tokenizer.json",
        f"{config.task}/train.jsonl",
        f"{config.task}/dev.jsonl",
    ):
        if not fs.exists(part):
            raise UserError(
                f"{part} does not exist: run make demo's first commands "
                "(corpus, tokenizer, prepare, demo_task build)"
            )
    rows = []
    for variant in variants:
        folder = os.path.join(config.output_dir, variant.name)
        os.makedirs(folder, exist_ok=True)
        metrics = pretrain(config, variant, folder)
        rows.append(row(variant, metrics, finetune(config, folder)))
        print(
            f"{variant.name}: masked accuracy {100 * metrics['eval_accuracy']:.1f} %, "
            f"dev {rows[-1]['metric']} {rows[-1]['mean']:.3f} ± {rows[-1]['std']:.3f}",
            flush=True,
        )
    text = table(rows)
    fs.write_bytes(os.path.join(config.output_dir, "table.md"), (text + "\n").encode("utf-8"))
    return text


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    config = flags.parse(parser, StudyFlags, argv)
    return run_cli(lambda: print(study(config)), argv)


if __name__ == "__main__":
    sys.exit(main())
