"""What both child processes share: the configurations a run measures, the batch of one,
and how a result line is printed."""

from __future__ import annotations

import json

# Default configurations per family on an accelerator: (size, length).
FULL = {
    "roberta": [("base", 128), ("base", 512), ("large", 128), ("large", 512)],
    "modernbert": [("base", 512), ("base", 1024)],
}
QUICK = {
    "roberta": [("base", 128), ("base", 512), ("large", 128)],
    "modernbert": [("base", 512), ("base", 1024)],
}


def configs(args, accelerator: bool) -> list[tuple[str, int]]:
    if args.configs:
        return [(c.split("/")[0], int(c.split("/")[1])) for c in args.configs.split(",")]
    if not accelerator:
        return [("tiny", 128)]
    return (QUICK if args.quick else FULL)[args.family]


def batch(args, length: int) -> int:
    return max(1, args.batch_tokens // length)


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def guarded(run) -> dict:
    """One configuration's result, or the last line of its error (the others still run)."""
    try:
        return run()
    except Exception as err:  # noqa: BLE001 (a benchmark reports every failure and goes on)
        last = (str(err).strip().splitlines() or [""])[-1]
        return {"error": f"{type(err).__name__}: {last}"}
