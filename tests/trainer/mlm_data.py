"""A tiny tokenizer, a learnable repetitive corpus and shard folders for trainer tests,
written with common/'s own writers (manifest + marker) or in the legacy HF example's format."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

from common import fs, manifest, schema, shards, tfrecord, tokenizer_files

SPECIALS = tokenizer_files.SPECIAL_TOKENS["wordpiece"]  # [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4
NUM_WORDS = 95  # vocabulary 100: 5 special tokens + w0..w94
SEQ_LEN = 32


def make_tokenizer(path, special_tokens_in_text: bool = False) -> tokenizer_files.TokenizerInfo:
    """`special_tokens_in_text`: "[MASK]" in a text is the mask token (else three pieces)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {
        tok: i
        for i, tok in enumerate(
            SPECIALS[r] for r in ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")
        )
    }
    vocab.update({f"w{i}": 5 + i for i in range(NUM_WORDS)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if special_tokens_in_text:
        tok.add_special_tokens(list(vocab)[:5])
    tokenizer_files.save(tok, str(path), SPECIALS, model_max_length=SEQ_LEN)
    return tokenizer_files.load(str(path))[1]


def repetitive_sequences(num: int, seed: int, length: int = SEQ_LEN):
    """[CLS] w_k w_k+1 ... [SEP] [PAD]...: each word predicts its neighbours (learnable)."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((num, length), np.int64)
    mask = np.zeros((num, length), np.int64)
    for row in range(num):
        n = int(rng.integers(length // 2, length - 1))  # words, leaves room for CLS/SEP
        start = int(rng.integers(0, NUM_WORDS))
        ids[row, 0], ids[row, n + 1] = 2, 3
        ids[row, 1 : n + 1] = 5 + (start + np.arange(n)) % NUM_WORDS
        mask[row, : n + 2] = 1
    return ids, mask


def write_split(
    split_dir: str,
    ids,
    mask,
    info,
    num_shards: int = 4,
    split: str = "train",
    committed: bool = True,
    legacy_format: bool = False,
) -> list[str]:
    """Writes shards (ours + the manifest that commits them unless `committed` is False, or
    the legacy example's names) without TensorFlow; returns their paths."""
    parts = np.array_split(np.arange(len(ids)), num_shards)
    paths, shard_entries = [], []
    for index, rows in enumerate(parts):
        name = (
            f"dataset-{index}-{len(rows)}.tfrecord"
            if legacy_format
            else shards.shard_name(split, index, len(rows))
        )
        path = f"{split_dir.rstrip('/')}/{name}"
        fs.write_bytes(path, tfrecord.frame(schema.encode_example(ids[r], mask[r]) for r in rows))
        paths.append(path)
        shard_entries.append(manifest.Shard(name, len(rows), int(mask[rows].sum())))
    if committed and not legacy_format:
        found = manifest.Manifest(
            split=split,
            max_length=ids.shape[1],
            num_examples=len(ids),
            num_tokens=int(mask.sum()),
            shards=shard_entries,
            tokenizer=info.to_dict(),
            pipeline_args={},
            accounting={},
        )
        manifest.write_manifest(split_dir, found)
    return paths


TINY = '{"num_layers": 1, "num_heads": 2, "hidden_dim": 64, "intermediate_dim": 128}'


# The reference run: 120 steps in three intervals (tests compare resumed runs with it).
STEPS = ["--train_steps", "120", "--eval_every", "40", "--save_every", "40"]


def task_args(corpus, output_dir, *extra) -> list[str]:
    """Flags for a tiny, fast run on the corpus fixture."""
    return [
        "--train_data",
        corpus["train"],
        "--eval_data",
        corpus["eval"],
        "--tokenizer",
        corpus["tokenizer"],
        "--output_dir",
        str(output_dir),
        "--model",
        "tiny",
        "--config",
        TINY,
        "--strategy",
        "cpu",
        "--per_replica_batch_size",
        "16",
        "--learning_rate",
        "1e-2",
        "--verbose",
        "0",
        *extra,
    ]


def saved_run(family: str = "roberta", backbone_config=None, **keys):
    """The `RunRecord` of a run config holding only `keys` (besides its family and backbone):
    what the plan and its checks read of a saved run."""
    from trainer.run_folder.run_record import RunRecord

    config = {"family": family, "backbone_config": backbone_config or {}, **keys}
    return RunRecord.from_dict(config)


class Preempted(Exception):
    pass


def preempt_at(step):
    """A callback that raises at the end of the interval reaching `step` (after its backup),
    as a preemption between two intervals would stop the process."""
    import keras

    from trainer.models.checkpoints import update_count

    class _Callback(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if update_count(self.model.optimizer) >= step:
                raise Preempted(step)

    return _Callback()


CARD_RUN_STEPS = 20


def prepared_tiny_run(root, corpus_jsonl, tokenizer_dir) -> dict:
    """Prepare (Beam, FnApiRunner) -> train CARD_RUN_STEPS steps; returns the folders."""
    import json

    from beam_pipelines import prepare
    from trainer.pretraining import task

    data, run = root / "prepared", root / "run"
    assert (
        prepare.run(
            [
                "--runner=FnApiRunner",
                "--input",
                str(corpus_jsonl),
                "--tokenizer",
                tokenizer_dir,
                "--output_dir",
                str(data),
                "--max_length",
                "32",
                "--validation_fraction",
                "0.1",
            ]
        )
        == 0
    )
    overrides = json.dumps(
        {"num_layers": 1, "hidden_dim": 32, "num_heads": 2, "intermediate_dim": 64}
    )
    assert (
        task.main(
            [
                "--train_data",
                str(data / "train"),
                "--eval_data",
                str(data / "validation"),
                "--output_dir",
                str(run),
                "--model",
                "tiny",
                "--config",
                overrides,
                "--strategy",
                "cpu",
                "--per_replica_batch_size",
                "16",
                "--train_steps",
                str(CARD_RUN_STEPS),
                "--eval_every",
                "10",
                "--save_every",
                "10",
                "--learning_rate",
                "3e-3",
                "--max_eval_batches",
                "4",
                "--verbose",
                "0",
            ]
        )
        == 0
    )
    return {"root": root, "data": data, "run": run}
