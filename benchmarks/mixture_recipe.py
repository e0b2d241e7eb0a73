"""The corpus recipe of docs/prepare.md, on local text: three named sources, a quality
classifier fine-tuned with our own trainer, a mixture with a decay phase, and what the mixture
changed in masked accuracy per source.

    python -m benchmarks.mixture_recipe sources --output_dir runs/recipe
    python -m benchmarks.mixture_recipe accuracy --model runs/recipe/mixed/export \\
        --eval runs/recipe/eval --max_length 64

`sources` writes, with no download, `OUT/sources/{docstrings,manpages,messages}.jsonl`: the
demo corpus' docstrings (beam_pipelines/demo_corpus.py), English manual pages rendered by
`man` (benchmarks/man_task.py), and the English source strings of the machine's translation
catalogs grouped into documents (benchmarks/system_texts.py). Every fifth document of each
source (by a hash of its text) is held out of the source files for `OUT/quality/{train,dev}.jsonl`:
a quality task of label `good` (the held-out document) against `bad` (the same document's
words shuffled: vocabulary kept, syntax gone), which `trainer.finetune` learns.

`accuracy` prints the masked accuracy of a transformers masked-LM folder (`trainer.export
--format hf`'s output) on each source's validation split (`EVAL/{source}/validation`,
prepared one source at a time): 15 % of the non-special tokens replaced by the mask token,
chosen by a seeded draw so that every model is scored on the same positions, the top
prediction compared.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import random

import numpy as np

from benchmarks import man_task, system_texts
from common import manifest, schema

SOURCES = ("docstrings", "manpages", "messages")


def _held_out(text: str) -> bool:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") % 5 == 0


def source_texts(demo_corpus: str, man_pages: int) -> dict[str, list[str]]:
    docstrings = [json.loads(line)["text"] for line in open(demo_corpus, encoding="utf-8")]
    pages = sorted(glob.glob("/usr/share/man/man1/*"))
    step = max(1, len(pages) // man_pages)
    manpages = [text for text in map(man_task.render, pages[::step][:man_pages]) if text.strip()]
    return {
        "docstrings": docstrings,
        "manpages": manpages,
        "messages": system_texts.english_documents(),
    }


def shuffled(text: str, rng: random.Random) -> str:
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def write_jsonl(path: str, rows: list[dict]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def sources(args) -> None:
    texts = source_texts(args.demo_corpus, args.man_pages)
    rng, labelled = random.Random(0), []
    for name, docs in texts.items():
        kept = [t for t in docs if not _held_out(t)]
        held = [t for t in docs if _held_out(t)][: args.quality_per_source]
        write_jsonl(f"{args.output_dir}/sources/{name}.jsonl", [{"text": t} for t in kept])
        labelled += [{"text": t[: args.quality_chars], "label": "good"} for t in held]
        labelled += [{"text": shuffled(t[: args.quality_chars], rng), "label": "bad"} for t in held]
        print(
            f"{name}: {len(kept):,} documents, {sum(map(len, kept)) / 1e6:.2f} M characters; "
            f"{len(held):,} held out for the quality task"
        )
    rng.shuffle(labelled)
    cut = len(labelled) // 5
    write_jsonl(f"{args.output_dir}/quality/dev.jsonl", labelled[:cut])
    write_jsonl(f"{args.output_dir}/quality/train.jsonl", labelled[cut:])
    print(f"quality task: {len(labelled) - cut:,} train, {cut:,} dev rows")


def _records(split_dir: str, max_length: int) -> np.ndarray:
    import tensorflow as tf

    found = manifest.read_manifest(split_dir)
    paths = found.shard_paths(split_dir)
    batches = (
        tf.data.TFRecordDataset(paths).batch(4096).map(lambda s: schema.parse_batch(s, max_length))
    )
    ids = [b[schema.INPUT_IDS].numpy() for b in batches]
    masks = [b[schema.ATTENTION_MASK].numpy() for b in batches]
    return np.concatenate(ids), np.concatenate(masks)


def masked_accuracy(model, tokenizer, ids: np.ndarray, mask: np.ndarray, rate: float, seed: int):
    """(accuracy, tokens scored) of the model's top prediction at seeded masked positions."""
    import torch

    special = np.isin(ids, np.array(tokenizer.all_special_ids))
    chosen = (np.random.default_rng(seed).random(ids.shape) < rate) & (mask == 1) & ~special
    inputs = np.where(chosen, tokenizer.mask_token_id, ids)
    right = total = 0
    with torch.inference_mode():
        for i in range(0, len(ids), 64):
            logits = model(
                input_ids=torch.tensor(inputs[i : i + 64]),
                attention_mask=torch.tensor(mask[i : i + 64]),
            ).logits
            pred = logits.argmax(-1).numpy()
            where = chosen[i : i + 64]
            right += int((pred[where] == ids[i : i + 64][where]).sum())
            total += int(where.sum())
    return right / max(total, 1), total


def accuracy(args) -> None:
    import torch
    import transformers

    torch.set_num_threads(os.cpu_count() or 1)
    model = transformers.AutoModelForMaskedLM.from_pretrained(args.model).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    print(f"| model | {' | '.join(SOURCES)} |")
    cells = []
    for name in SOURCES:
        ids, mask = _records(os.path.join(args.eval, name, "validation"), args.max_length)
        acc, n = masked_accuracy(model, tokenizer, ids, mask, args.rate, args.seed)
        cells.append(f"{100 * acc:.2f} % ({n:,})")
    print(f"| {args.name or args.model} | {' | '.join(cells)} |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("sources")
    make.add_argument("--output_dir", required=True)
    make.add_argument("--demo_corpus", default="runs/demo/corpus.jsonl")
    make.add_argument("--man_pages", type=int, default=1500)
    make.add_argument("--quality_per_source", type=int, default=400)
    make.add_argument("--quality_chars", type=int, default=1500)
    score = commands.add_parser("accuracy")
    score.add_argument("--model", required=True)
    score.add_argument("--eval", required=True)
    score.add_argument("--max_length", type=int, required=True)
    score.add_argument("--rate", type=float, default=0.15)
    score.add_argument("--seed", type=int, default=0)
    score.add_argument("--name", default="")
    args = parser.parse_args(argv)
    sources(args) if args.command == "sources" else accuracy(args)


if __name__ == "__main__":
    main()
