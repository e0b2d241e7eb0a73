"""The benchmark's printed table: tokens/s, achieved FLOP/s and MFU of both frameworks per
configuration, and the notes under it."""

from __future__ import annotations

from benchmarks.accel import child


def cells(
    result: dict | None, key: str, facts: dict, peak: float, scale: float
) -> tuple[str, float | None]:
    """One framework's three cells of a row, and its tokens/s (None where it has none);
    `facts`: the family's, from the JAX child (`ours.family_facts`: FLOPs per token)."""
    run = (result or {}).get("runs", {}).get(key)
    if not run:
        return f"{'-':>10s}{'-':>9s}{'-':>7s}", None
    if "error" in run:
        return f"  {run['error'][:24]:>24s}", None
    tokens = run["examples_per_second"] * int(key.split("/")[1])
    achieved = tokens * facts["configs"][key]["flops_per_token"]
    return f"{tokens:10,.0f}{achieved / scale:9.2f}{100 * achieved / peak:6.1f}%", tokens


def _notes(args, ours: dict | None) -> list[str]:
    runs = (ours or {}).get("runs") or {}
    facts = (ours or {}).get("facts") or {}
    notes = [f"{key} ours: {run['note']}" for key, run in runs.items() if "note" in run]
    notes.append(f"our attention on this device: {(ours or {}).get('attention')}")
    if facts:
        notes.append(
            f"{args.family}: {100 * facts['mask_rate']:.0f} % masking (its pretraining default) "
            "on both sides"
            + (
                "; rows of packed documents (length / 4 tokens on average), which ours keeps "
                "apart and transformers' SDPA path attends across"
                if facts["packed"]
                else ""
            )
        )
    # a backbone that picks its own attention kernel records each layer's (ModernBERT)
    paths = {key: run["attention_paths"] for key, run in runs.items() if "attention_paths" in run}
    if paths:
        notes.append(
            "our layers' attention paths (trainer): "
            + "; ".join(
                f"{key} " + ", ".join(f"{path} x{n}" for path, n in used.items())
                for key, used in paths.items()
            )
        )
    return notes


def report(args, ours: dict | None, theirs: dict | None) -> list[str]:
    first = ours or theirs or {}
    accelerator = first.get("accelerator", False)
    unit, scale = ("TFLOP/s", 1e12) if accelerator else ("GFLOP/s", 1e9)
    peaks = [r["peak"] for r in (ours, theirs) if r]
    peak = max(peaks) if peaks else float("nan")
    kind = "bf16" if accelerator else "float32"
    lines = [
        f"device: {first.get('device', '?')}; measured {kind} matrix-product peak "
        + ", ".join(
            f"{name} {r['peak'] / scale:,.1f} {unit}"
            for name, r in (("JAX", ours), ("PyTorch", theirs))
            if r
        )
        + f"; MFU over {peak / scale:,.1f}",
        f"{'size':6s}{'len':>5s}{'batch':>6s} | {'ours tok/s':>10s}{unit:>9s}{'MFU':>7s}"
        f" | {'torch tok/s':>10s}{unit:>9s}{'MFU':>7s} | ours/torch",
    ]
    facts = (ours or {}).get("facts")  # None: our side printed nothing, nor ran theirs
    for size, length in child.configs(args, accelerator):
        key = f"{size}/{length}"
        mine, our_tokens = cells(ours, key, facts, peak, scale)
        their, their_tokens = cells(theirs, key, facts, peak, scale)
        ratio = f"{our_tokens / their_tokens:.2f}x" if our_tokens and their_tokens else "-"
        batch = child.batch(args, length)
        lines.append(f"{size:6s}{length:5d}{batch:6d} | {mine} | {their} | {ratio}")
    return lines + _notes(args, ours)
