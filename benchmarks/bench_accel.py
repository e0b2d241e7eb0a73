"""The trainer's speed on an accelerator beside PyTorch: tokens/s, TFLOP/s and MFU, one table.

    python -m benchmarks.bench_accel            # base and large at 128 and 512 (GPU or TPU)
    python -m benchmarks.bench_accel --quick    # base 128+512, large 128: ~8 minutes on an H100
    python -m benchmarks.bench_accel --family modernbert   # ModernBERT-base at 512 and 1024
    python -m benchmarks.bench_accel --cpu      # here: tiny, GFLOP/s against the CPU's peak

One run, three child processes in turn (each frees its device memory for the next): the
chip's peak, measured with a large bf16 matrix product (float32 on a CPU); our trainer
through its real path (`trainer.pretraining.task.run`: prepared shards with a manifest, the grain
input, masking inside the compiled step, bf16, fused attention and steps per call as on any GPU);
transformers' `RobertaForMaskedLM` (`--family modernbert`: `ModernBertForMaskedLM` on rows of
packed documents, 30 % masking as its recipe) in PyTorch (bf16 autocast, SDPA attention,
`torch.compile`, fused AdamW) at the same size, batch, length, masking rate and dropout.
Needs JAX and PyTorch, no TensorFlow, no network (docs/benchmarks.md "On the GPU machine").

Model FLOPs per token, the same for both: the family record's `flops_per_token`
(trainer/families/flops.py: the dense weights, the vocabulary projection at the masking rate,
attention over the keys each layer attends), which the JAX child reads with the rest of the
family's facts and prints first; the parent hands them to the PyTorch child (`--facts`).
tokens/s ratios are TFLOP/s ratios. The parts: benchmarks/accel/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from benchmarks.accel import child, shapes, table


def _run_child(kind: str, args, argv: list[str], seconds: float) -> dict | None:
    """The child's device, peak and `runs` ({"size/length": result}), from the lines it
    printed within `seconds` (a configuration cut off is missing from the table)."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONUNBUFFERED": "1"}
    if args.cpu:
        env["JAX_PLATFORMS"] = "cpu"
    if args.site and kind == "jax":  # the carried wheels, for our trainer only: PyTorch
        env["PYTHONPATH"] = os.pathsep.join(  # keeps the machine's own packages
            [os.path.abspath(args.site)] + [p for p in [env.get("PYTHONPATH")] if p]
        )
    command = [sys.executable, "-m", "benchmarks.bench_accel", "--child", kind, *argv]
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=seconds)
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as stopped:
        out, err, code = (
            _text(stopped.stdout),
            _text(stopped.stderr),
            f"stopped after {seconds:.0f} s",
        )
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if code != 0:
        print(f"{kind}: exit {code}\n{err[-3000:]}", file=sys.stderr)
    if not records:
        return None
    return {**records[0], "runs": {r.pop("run"): r for r in records[1:]}}


def _text(data) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else (data or "")


def _check_configs(parser, args) -> None:
    """One line naming the bad entry of --configs (SIZE/LENGTH of the family's sizes)."""
    sizes = shapes.SIZE_NAMES
    for entry in (args.configs or "").split(",") if args.configs else ():
        size, _, length = entry.partition("/")
        if size not in sizes or not length.isdigit() or int(length) < 2:
            parser.error(
                f"--configs {entry!r}: want SIZE/LENGTH, SIZE one of {', '.join(sizes)} "
                "and LENGTH a whole number of at least 2"
            )


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--family",
        choices=shapes.FAMILIES,
        default=shapes.DEFAULT,
        help="roberta (default: base and large at 128, 512) or modernbert (base at 512, 1024)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="20-step intervals within 480 s (roberta: base 128+512, large 128 only)",
    )
    parser.add_argument("--cpu", action="store_true", help="on the CPU even with a GPU")
    parser.add_argument("--configs", help="SIZE/LENGTH,... instead of the default set")
    parser.add_argument(
        "--batch_tokens",
        type=int,
        help="tokens per batch (default 16384 "
        "on an accelerator: batch 128 at 128, 32 at 512; 2048 on a CPU)",
    )
    parser.add_argument(
        "--vocab",
        type=int,
        help="default: the family's published checkpoint's (RoBERTa 50265, ModernBERT 50368); "
        "8000 on a CPU",
    )
    parser.add_argument("--interval", type=int, help="steps per timed interval")
    parser.add_argument("--intervals", type=int, default=3, help="the first one compiles")
    parser.add_argument("--max_rows", type=int, default=16384, help="rows of synthetic data")
    parser.add_argument(
        "--torch",
        choices=("auto", "yes", "no"),
        default="auto",
        help="auto: on an accelerator only",
    )
    parser.add_argument("--no_torch_compile", dest="torch_compile", action="store_false")
    parser.add_argument("--trainer_args", default="", help="more trainer.task flags")
    parser.add_argument("--site", help="folder of the carried wheels' packages (JAX only)")
    parser.add_argument(
        "--budget",
        type=float,
        default=3000,
        help="seconds for both frameworks: ours gets 60 %%, PyTorch the rest (--quick: 480)",
    )
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--child", choices=("jax", "torch"), help=argparse.SUPPRESS)
    # the family's facts, from the JAX child to the PyTorch child (JSON: ours.family_facts)
    parser.add_argument("--facts", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    _check_configs(parser, args)
    return args


def _defaults(args, accelerator: bool):
    args.batch_tokens = args.batch_tokens or (16384 if accelerator else 2048)
    # None on an accelerator: the family's, which the JAX child reads from its record
    args.vocab = args.vocab or (None if accelerator else 8000)
    args.interval = args.interval or ((20 if args.quick else 50) if accelerator else 3)
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.quick and args.budget == 3000:
        args.budget = 480
    if args.child:
        from benchmarks.accel import ours, theirs

        accelerator = (args.child == "jax" and not args.cpu and _jax_accelerator()) or (
            args.child == "torch" and not args.cpu and _torch_accelerator()
        )
        run = ours.jax_child if args.child == "jax" else theirs.torch_child
        run(_defaults(args, accelerator))
        return 0
    forwarded = list(argv if argv is not None else sys.argv[1:])
    start = time.monotonic()
    ours_result = _run_child("jax", args, forwarded, args.budget * 0.6)
    accelerator = bool(ours_result and ours_result["accelerator"])
    with_torch = args.torch == "yes" or (args.torch == "auto" and accelerator)
    facts = (ours_result or {}).get("facts")
    if with_torch and facts is None:
        print("torch: not run: our side printed no facts of the family", file=sys.stderr)
    left = args.budget - (time.monotonic() - start)
    theirs_result = (
        _run_child("torch", args, [*forwarded, "--facts", json.dumps(facts)], left)
        if with_torch and facts
        else None
    )
    accelerator = accelerator or bool(theirs_result and theirs_result["accelerator"])
    lines = table.report(_defaults(args, accelerator), ours_result, theirs_result)
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ours": ours_result, "torch": theirs_result, "table": lines}, f, indent=2)
    runs = (ours_result or {}).get("runs", {})
    done = ours_result and len(runs) == len(child.configs(args, accelerator))
    return 0 if done and all("error" not in r for r in runs.values()) else 1


def _jax_accelerator() -> bool:
    import jax

    return jax.default_backend() != "cpu"


def _torch_accelerator() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    sys.exit(main())
