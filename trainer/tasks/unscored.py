"""A test split without labels (no label column, or every label missing or -1 as in GLUE's
test splits): each seed's best epoch predicts it, the predictions are written as JSONL beside
results.json, and no test score is made up.

`OUTPUT_DIR/predictions/test-seed-N.jsonl` holds one line per example read, in the file's
order: `{"row": R, "prediction": P}`, R the example's row in the file (1 = the first data
row; skipped rows have none), P the class name (classification) or the number (regression).

Example:
    >>> relative = write(output_dir, seed, split, ("neg", "pos"), np.array([1, 0]), chief=True)
    >>> relative
    'predictions/test-seed-1.jsonl'
"""

from __future__ import annotations

import json

import numpy as np

from common import fs

FOLDER = "predictions"


def relative_path(seed: int) -> str:
    return f"{FOLDER}/test-seed-{seed}.jsonl"


def write(output_dir: str, seed: int, split, names, predicted: np.ndarray, chief: bool) -> str:
    """Writes (on the chief only: a pod's processes hold the same predictions) one seed's
    predictions of `split`; returns their path relative to `output_dir`."""
    relative = relative_path(seed)
    if chief:
        lines = [
            json.dumps({"row": row, "prediction": names[p] if names else float(p)})
            for row, p in zip(split.row_numbers, np.asarray(predicted).tolist())
        ]
        fs.write_bytes(fs.join(output_dir, relative), ("\n".join(lines) + "\n").encode("utf-8"))
    return relative


def note(counts: dict) -> str:
    """The line under the table."""
    return (
        f"test: {counts['examples']} example(s) without labels: not scored; each seed's "
        f"predictions in {FOLDER}/test-seed-N.jsonl"
    )
