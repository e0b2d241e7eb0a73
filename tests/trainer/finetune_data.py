"""Tiny pretrained models and labelled files for the fine-tuning tests.

The model is a fresh tiny keras-hub masked LM (1 layer, hidden 32) over the WordLevel
vocabulary of `mlm_data` (w0..w94), saved as our export (preset + run_config.json +
tokenizer/) or as a run folder (run_config.json, one checkpoint, metrics.json and the
shard folders the unigram baseline reads): seconds, not a training run.
"""

from __future__ import annotations

import csv
import json

import numpy as np

from common import fs, tokenizer_files
from tests.trainer import mlm_data

CONFIG = {"num_layers": 1, "num_heads": 2, "hidden_dim": 32, "intermediate_dim": 64, "dropout": 0.0}
MAX_SEQUENCE_LENGTH = 32


def tiny_masked_lm(family: str):
    """Seeded: a test's results must not depend on which tests ran before it in the process."""
    import keras

    from trainer import families
    from trainer.models.model import build_masked_lm

    keras.utils.set_random_seed(0)
    return build_masked_lm(
        families.get(family),
        dict(CONFIG, vocabulary_size=100, max_sequence_length=MAX_SEQUENCE_LENGTH),
    )


def run_config(family: str, info, **extra) -> dict:
    return {
        "family": family,
        "tokenizer": info.to_dict(),
        **extra,
        "backbone_config": dict(
            CONFIG, vocabulary_size=100, max_sequence_length=MAX_SEQUENCE_LENGTH
        ),
    }


def export_preset(root, family: str) -> str:
    """Our keras-hub export of a fresh tiny model: preset files, run_config, tokenizer/."""
    preset, tokenizer = root / f"{family}-export", root / f"{family}-tokenizer"
    info = mlm_data.make_tokenizer(tokenizer)
    tiny_masked_lm(family).save_to_preset(str(preset))
    fs.write_json(str(preset / "run_config.json"), run_config(family, info))
    tokenizer_files.copy(str(tokenizer), str(preset / "tokenizer"))
    return str(preset)


def run_folder(root, family: str, masked_accuracy: float) -> str:
    """A training output folder: one checkpoint at step 10 whose metrics.json records
    `masked_accuracy`, with real shard folders for the unigram baseline."""
    from trainer.models.checkpoints import publish

    run = root / f"{family}-run"
    info = mlm_data.make_tokenizer(run / "tokenizer")
    mlm_data.write_split(
        str(root / "train"), *mlm_data.repetitive_sequences(64, 0), info, num_shards=1
    )
    mlm_data.write_split(
        str(root / "eval"),
        *mlm_data.repetitive_sequences(32, 1),
        info,
        num_shards=1,
        split="validation",
    )
    config = run_config(
        family,
        info,
        train_data=str(root / "train"),
        eval_data=str(root / "eval"),
        max_length=mlm_data.SEQ_LEN,
        global_batch_size=16,
        max_eval_batches=2,
    )
    fs.write_json(str(run / "run_config.json"), config)
    publish(tiny_masked_lm(family), str(run / "checkpoints" / "ckpt-00000010.weights.h5"))
    fs.write_json(
        str(run / "metrics.json"),
        {"steps": 10, "eval_loss": 4.0, "eval_accuracy": masked_accuracy, "eval_perplexity": 54.6},
    )
    return str(run)


def words(rng, count: int) -> str:
    return " ".join(f"w{int(i)}" for i in rng.integers(10, 95, count))


def examples(count: int, seed: int, pair: bool, regression: bool) -> list[dict]:
    """Rows whose label is learnable from the text: w0 present -> "yes" (or a higher score)."""
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(count):
        positive = index % 2 == 0
        text = words(rng, int(rng.integers(3, 8))) + (" w0" if positive else " w1")
        row = {"sentence": text, "label": "yes" if positive else "no"}
        if pair:
            row["second"] = words(rng, int(rng.integers(2, 6)))
        if regression:
            row["label"] = f"{(4.0 if positive else 1.0) + rng.uniform(0, 1):.3f}"
        rows.append(row)
    return rows


def write(path, rows: list[dict]) -> str:
    """`rows` as JSONL, CSV or TSV by the file's extension."""
    path = str(path)
    with open(path, "w", encoding="utf-8", newline="") as f:
        columns = list(dict.fromkeys(key for row in rows for key in row))
        if path.endswith(".jsonl"):
            f.writelines(json.dumps(row) + "\n" for row in rows)
        elif path.endswith(".tsv"):  # GLUE's way: tabs, no quoting
            f.write("\t".join(columns) + "\n")
            f.writelines("\t".join(str(row.get(c, "")) for c in columns) + "\n" for row in rows)
        else:
            writer = csv.DictWriter(f, columns)
            writer.writeheader()
            writer.writerows(rows)
    return path
