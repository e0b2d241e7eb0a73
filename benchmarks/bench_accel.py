"""The trainer's speed on an accelerator beside PyTorch: tokens/s, TFLOP/s and MFU, one table.

    python -m benchmarks.bench_accel            # base and large at 128 and 512 (GPU or TPU)
    python -m benchmarks.bench_accel --quick    # base 128+512, large 128: ~8 minutes on an H100
    python -m benchmarks.bench_accel --cpu      # here: tiny, GFLOP/s against the CPU's peak

One run, three child processes in turn (each frees its device memory for the next): the
chip's peak, measured with a large bf16 matrix product (float32 on a CPU); our trainer
through its real path (`trainer.task.run`: prepared shards with a manifest, the grain input,
masking inside the compiled step, bf16, fused attention and steps per call as on any GPU);
transformers' `RobertaForMaskedLM` in PyTorch (bf16 autocast, SDPA attention,
`torch.compile`, fused AdamW) at the same size, batch, length, masking rate and dropout.
Needs JAX and PyTorch, no TensorFlow, no network (docs/benchmarks.md "On the GPU machine").

Model FLOPs per token, the same for both: 6 x (the encoder's and the LM head's dense weights)
+ 6 x hidden x vocabulary x the masked fraction (the vocabulary projection an MLM needs: our
step computes it at the masked slots only, transformers at every position) + 12 x layers x
hidden x length (attention scores and values). tokens/s ratios are TFLOP/s ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

# The shapes of trainer/families/sizes.py (checked equal by tests/trainer/test_bench_accel.py; this
# parent process imports nothing of the trainer, so that it never initialises a device).
SIZES = {
    "tiny": dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=512),
    "small": dict(num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=1024),
    "base": dict(num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072),
    "large": dict(num_layers=24, num_heads=16, hidden_dim=1024, intermediate_dim=4096),
}
MASK_RATE = 0.15
FULL = [("base", 128), ("base", 512), ("large", 128), ("large", 512)]
QUICK = [("base", 128), ("base", 512), ("large", 128)]


def dense_weights(size: str) -> int:
    """Weights of the matrix products per token (encoder + the LM head's transform)."""
    s = SIZES[size]
    h, i = s["hidden_dim"], s["intermediate_dim"]
    return s["num_layers"] * (4 * h * h + 2 * h * i) + h * h


def flops_per_token(size: str, length: int, vocab: int) -> float:
    s = SIZES[size]
    return (
        6 * dense_weights(size)
        + 6 * s["hidden_dim"] * vocab * MASK_RATE
        + 12 * s["num_layers"] * s["hidden_dim"] * length
    )


# --- The chip's peak --------------------------------------------------------------------


def _timed(run, sync, repeats: int) -> float:
    sync(run())  # compile / warm up
    start = time.perf_counter()
    for _ in range(repeats - 1):
        run()
    sync(run())
    return (time.perf_counter() - start) / repeats


def jax_peak(accelerator: bool) -> float:
    """FLOP/s of a large square matrix product: bf16 on an accelerator, float32 on a CPU."""
    import jax
    import jax.numpy as jnp

    n, dtype = (8192, jnp.bfloat16) if accelerator else (2048, jnp.float32)
    a = jax.random.normal(jax.random.key(0), (n, n), dtype)
    b = jax.random.normal(jax.random.key(1), (n, n), dtype)
    product = jax.jit(jnp.matmul)
    seconds = _timed(
        lambda: product(a, b), lambda x: x.block_until_ready(), 20 if accelerator else 5
    )
    return 2 * n**3 / seconds


def torch_peak(device: str) -> float:
    import torch

    n, dtype = (8192, torch.bfloat16) if device == "cuda" else (2048, torch.float32)
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))

    def sync(_):
        if device == "cuda":
            torch.cuda.synchronize()

    return 2 * n**3 / _timed(lambda: a @ b, sync, 20 if device == "cuda" else 5)


# --- Our trainer (JAX) ------------------------------------------------------------------


def write_prepared(root: str, length: int, vocab: int, rows: int, eval_rows: int) -> dict:
    """A tokenizer and two prepared splits as the prepare pipeline writes them: shards of
    our records (common/schema.py) in TFRecord framing (common/tfrecord.py) committed by a
    manifest. Full rows of random ids: [CLS] ... [SEP], no padding."""
    import google_crc32c
    import numpy as np
    from tokenizers import Tokenizer, models

    from common import manifest, schema, shards, tfrecord, tokenizer_files

    specials = tokenizer_files.SPECIAL_TOKENS["wordpiece"]  # [PAD]=0 ... [MASK]=4
    roles = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")
    words = {specials[r]: i for i, r in enumerate(roles)}
    words.update({f"w{i}": i for i in range(5, vocab)})
    tokenizer_dir = os.path.join(root, "tokenizer")
    tokenizer_files.save(
        Tokenizer(models.WordLevel(words, unk_token="[UNK]")),
        tokenizer_dir,
        specials,
        model_max_length=length,
    )
    info = tokenizer_files.load(tokenizer_dir)[1]
    out = {"tokenizer": tokenizer_dir}
    for split, count, seed in (("train", rows, 0), ("validation", eval_rows, 1)):
        ids = np.random.default_rng(seed).integers(5, vocab, (count, length), np.int64)
        ids[:, 0], ids[:, -1] = 2, 3
        folder = out[split] = os.path.join(root, split)
        os.makedirs(folder)
        entries = []
        for index, part in enumerate(np.array_split(np.arange(count), 4)):
            data = tfrecord.frame(schema.encode_examples(ids[part], np.ones_like(ids[part])))
            name = shards.shard_name(split, index, len(part))
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
            entries.append(
                manifest.Shard(
                    name,
                    len(part),
                    len(part) * length,
                    len(data),
                    f"{google_crc32c.value(data):08x}",
                )
            )
        manifest.write_manifest(
            folder,
            manifest.Manifest(
                split=split,
                max_length=length,
                num_examples=count,
                num_tokens=count * length,
                shards=entries,
                tokenizer={**info.to_dict(), "path": tokenizer_dir},
                pipeline_args={},
                accounting={},
            ),
        )
    return out


def train_ours(args, size: str, length: int, accelerator: bool) -> dict:
    """examples/s of `trainer.task.run` after its first interval (which compiles)."""
    from trainer import task
    from trainer.config import parse_args

    batch, total = _batch(args, length), args.interval * args.intervals
    with tempfile.TemporaryDirectory() as root:
        data = write_prepared(root, length, args.vocab, min(batch * total, args.max_rows), batch)
        config = parse_args(
            [
                "--train_data",
                data["train"],
                "--eval_data",
                data["validation"],
                "--output_dir",
                os.path.join(root, "run"),
                "--model",
                size,
                "--backend",
                "jax",
                "--strategy",
                "auto" if accelerator else "cpu",
                "--per_replica_batch_size",
                str(batch),
                "--train_steps",
                str(total),
                "--eval_every",
                str(args.interval),
                "--save_every",
                str(total),
                "--max_eval_batches",
                "1",
                "--learning_rate",
                "1e-4",
                "--shuffle_buffer_size",
                "1024",
                "--verbose",
                "0",
                *shlex.split(args.trainer_args),
            ]
        )
        metrics = task.run(config)
        with open(os.path.join(root, "run", "run_config.json")) as f:
            run = json.load(f)
    return {
        "examples_per_second": metrics["examples_per_second"],
        "batch": batch,
        "precision": run["precision"],
        "fused_attention": run.get("fused_attention"),
    }


def _batch(args, length: int) -> int:
    return max(1, args.batch_tokens // length)


def jax_child(args) -> None:
    """Prints the device and its peak, then one JSON line per configuration as it ends (a
    parent that stops this process at its time limit keeps the lines printed so far)."""
    import jax

    from benchmarks import accel_paths

    accelerator = jax.default_backend() != "cpu"
    kernel = (
        _guarded(lambda: {"attention": accel_paths.attention_kernel()})
        if accelerator
        else {"attention": "n/a on a CPU"}
    )
    _emit(
        {
            "device": jax.devices()[0].device_kind,
            "accelerator": accelerator,
            "peak": jax_peak(accelerator),
            "attention": kernel.get("attention") or kernel["error"],
        }
    )
    unfused = None  # why fused attention was switched off, once it was
    for size, length in _configs(args, accelerator):
        result = _guarded(lambda s=size, n=length: train_ours(args, s, n, accelerator))
        if "error" in result and accelerator and "--fused_attention" not in args.trainer_args:
            # cuDNN's kernel is chosen when XLA compiles: if it refuses, measure the rest
            # of the step without it rather than nothing, and say so on every row after.
            args.trainer_args += " --fused_attention false"
            unfused = f"without fused attention, which failed ({result['error'][:200]})"
            result = _guarded(lambda s=size, n=length: train_ours(args, s, n, accelerator))
        _emit({"run": f"{size}/{length}", **result, **({"note": unfused} if unfused else {})})


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def _guarded(run) -> dict:
    """One configuration's result, or the last line of its error (the others still run)."""
    try:
        return run()
    except Exception as err:  # noqa: BLE001 (a benchmark reports every failure and goes on)
        last = (str(err).strip().splitlines() or [""])[-1]
        return {"error": f"{type(err).__name__}: {last}"}


# --- transformers in PyTorch ------------------------------------------------------------


def train_torch(args, size: str, length: int, device: str, fused: bool) -> dict:
    """examples/s of RobertaForMaskedLM (bf16 autocast on a GPU, SDPA, torch.compile)."""
    import torch
    import transformers

    s, batch = SIZES[size], _batch(args, length)
    config = transformers.RobertaConfig(
        vocab_size=args.vocab,
        hidden_size=s["hidden_dim"],
        num_hidden_layers=s["num_layers"],
        num_attention_heads=s["num_heads"],
        intermediate_size=s["intermediate_dim"],
        max_position_embeddings=length + 2,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.0 if fused else 0.1,
    )
    model = (
        transformers.RobertaForMaskedLM._from_config(config, attn_implementation="sdpa")
        .to(device)
        .train()
    )
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=1e-4,
        betas=(0.9, 0.98),
        eps=1e-6,
        weight_decay=1e-3,
        fused=device == "cuda",
    )
    forward = torch.compile(model) if args.torch_compile else model
    ones = torch.ones(batch, length, dtype=torch.long, device=device)

    def step():
        ids = torch.randint(5, args.vocab, (batch, length), device=device)
        chosen = torch.rand(ids.shape, device=device) < MASK_RATE
        inputs = torch.where(chosen & (torch.rand(ids.shape, device=device) < 0.8), 4, ids)
        with torch.autocast(device, torch.bfloat16, enabled=device == "cuda"):
            loss = forward(
                input_ids=inputs, attention_mask=ones, labels=torch.where(chosen, ids, -100)
            ).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    def sync(loss):
        return float(loss.detach())  # waits for the device

    steps = args.interval * (args.intervals - 1)
    sync(step())  # compiles
    seconds = _timed(step, sync, steps)
    return {
        "examples_per_second": batch / seconds,
        "batch": batch,
        "precision": "bf16" if device == "cuda" else "fp32",
        "fused_attention": fused,
    }


def torch_child(args) -> None:
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    fused = device == "cuda"  # as our trainer's default there (plan.device_settings)
    _emit(
        {
            "device": torch.cuda.get_device_name() if device == "cuda" else "CPU",
            "accelerator": device == "cuda",
            "peak": torch_peak(device),
        }
    )
    for size, length in _configs(args, device == "cuda"):
        _emit(
            {
                "run": f"{size}/{length}",
                **_guarded(lambda s=size, n=length: train_torch(args, s, n, device, fused)),
            }
        )


# --- The parent: children in turn, one table ------------------------------------------


def _configs(args, accelerator: bool) -> list[tuple[str, int]]:
    if args.configs:
        return [(c.split("/")[0], int(c.split("/")[1])) for c in args.configs.split(",")]
    if not accelerator:
        return [("tiny", 128)]
    return QUICK if args.quick else FULL


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


def _cells(
    result: dict | None, key: str, size: str, length: int, vocab: int, peak: float, scale: float
) -> tuple[str, float | None]:
    run = (result or {}).get("runs", {}).get(key)
    if not run:
        return f"{'-':>10s}{'-':>9s}{'-':>7s}", None
    if "error" in run:
        return f"  {run['error'][:24]:>24s}", None
    tokens = run["examples_per_second"] * length
    achieved = tokens * flops_per_token(size, length, vocab)
    return f"{tokens:10,.0f}{achieved / scale:9.2f}{100 * achieved / peak:6.1f}%", tokens


def report(args, ours: dict | None, torch_result: dict | None) -> list[str]:
    first = ours or torch_result or {}
    accelerator = first.get("accelerator", False)
    unit, scale = ("TFLOP/s", 1e12) if accelerator else ("GFLOP/s", 1e9)
    peaks = [r["peak"] for r in (ours, torch_result) if r]
    peak = max(peaks) if peaks else float("nan")
    kind = "bf16" if accelerator else "float32"
    lines = [
        f"device: {first.get('device', '?')}; measured {kind} matrix-product peak "
        + ", ".join(
            f"{name} {r['peak'] / scale:,.1f} {unit}"
            for name, r in (("JAX", ours), ("PyTorch", torch_result))
            if r
        )
        + f"; MFU over {peak / scale:,.1f}",
        f"{'size':6s}{'len':>5s}{'batch':>6s} | {'ours tok/s':>10s}{unit:>9s}{'MFU':>7s}"
        f" | {'torch tok/s':>10s}{unit:>9s}{'MFU':>7s} | ours/torch",
    ]
    notes = [
        f"{key} ours: {run['note']}"
        for key, run in ((ours or {}).get("runs") or {}).items()
        if "note" in run
    ] + [f"our attention on this device: {(ours or {}).get('attention')}"]
    for size, length in _configs(args, accelerator):
        key = f"{size}/{length}"
        mine, our_tokens = _cells(ours, key, size, length, args.vocab, peak, scale)
        theirs, their_tokens = _cells(torch_result, key, size, length, args.vocab, peak, scale)
        ratio = f"{our_tokens / their_tokens:.2f}x" if our_tokens and their_tokens else "-"
        lines.append(f"{size:6s}{length:5d}{_batch(args, length):6d} | {mine} | {theirs} | {ratio}")
    return lines + notes


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="base 128+512, large 128")
    parser.add_argument("--cpu", action="store_true", help="on the CPU even with a GPU")
    parser.add_argument("--configs", help="SIZE/LENGTH,... instead of the default set")
    parser.add_argument(
        "--batch_tokens",
        type=int,
        help="tokens per batch (default 16384 "
        "on an accelerator: batch 128 at 128, 32 at 512; 2048 on a CPU)",
    )
    parser.add_argument("--vocab", type=int, help="default 50265 (RoBERTa's); 8000 on a CPU")
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
    return parser.parse_args(argv)


def _defaults(args, accelerator: bool):
    args.batch_tokens = args.batch_tokens or (16384 if accelerator else 2048)
    args.vocab = args.vocab or (50265 if accelerator else 8000)
    args.interval = args.interval or ((20 if args.quick else 50) if accelerator else 3)
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.quick and args.budget == 3000:
        args.budget = 480
    if args.child:
        accelerator = (args.child == "jax" and not args.cpu and _jax_accelerator()) or (
            args.child == "torch" and not args.cpu and _torch_accelerator()
        )
        (jax_child if args.child == "jax" else torch_child)(_defaults(args, accelerator))
        return 0
    forwarded = list(argv if argv is not None else sys.argv[1:])
    start = time.monotonic()
    ours = _run_child("jax", args, forwarded, args.budget * 0.6)
    accelerator = bool(ours and ours["accelerator"])
    with_torch = args.torch == "yes" or (args.torch == "auto" and accelerator)
    left = args.budget - (time.monotonic() - start)
    theirs = _run_child("torch", args, forwarded, left) if with_torch else None
    accelerator = accelerator or bool(theirs and theirs["accelerator"])
    lines = report(_defaults(args, accelerator), ours, theirs)
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ours": ours, "torch": theirs, "table": lines}, f, indent=2)
    done = ours and len(ours["runs"]) == len(_configs(args, accelerator))
    return 0 if done and all("error" not in r for r in ours["runs"].values()) else 1


def _jax_accelerator() -> bool:
    import jax

    return jax.default_backend() != "cpu"


def _torch_accelerator() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    sys.exit(main())
