"""A small retrieval task for the embedding and reranking tests, in made-up words of common
letters (every test tokenizer's alphabet has them; `mlm_data`'s w0..w94 would be [UNK] to a
WordPiece trained on English): topics of two words; a query names its topic's words, its
relevant document holds them among other words. Pairs (JSONL) for training, a BEIR folder
(dev and test judgements) for scoring; training and judged topics differ."""

from __future__ import annotations

import json

import numpy as np

TOPICS = 45  # WORDS[0..89] as 45 two-word topics; WORDS[90..94] are noise
_SYLLABLES = [c + v for c in "bdfgklmnprst" for v in "aeiou"]
# 37 is prime to 3600: the 95 picks of two syllables are all different words
WORDS = [_SYLLABLES[i * 37 % 3600 // 60] + _SYLLABLES[i * 37 % 60] for i in range(95)]


def _topic(t: int) -> list[str]:
    return [WORDS[2 * t], WORDS[2 * t + 1]]


def _document(rng, t: int) -> str:
    noise = [WORDS[int(i)] for i in rng.integers(90, 95, 3)]
    words = _topic(t) + noise
    rng.shuffle(words)
    return " ".join(words)


def write_pairs(path, topics, seed: int = 0, negatives: int = 0) -> str:
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for t in topics:
            row = {"query": " ".join(_topic(t)), "positive": _document(rng, t)}
            if negatives:
                others = [u for u in topics if u != t][:negatives]
                row["negative"] = [_document(rng, u) for u in others]
            f.write(json.dumps(row) + "\n")
    return str(path)


def write_beir(folder, topics, seed: int = 1, train=()) -> str:
    rng = np.random.default_rng(seed)
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for t in range(TOPICS):
            f.write(json.dumps({"_id": f"d{t}", "title": "", "text": _document(rng, t)}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for t in topics:
            f.write(json.dumps({"_id": f"q{t}", "text": " ".join(_topic(t))}) + "\n")
    half = len(topics) // 2
    splits = (("dev", topics[:half]), ("test", topics[half:]), ("train", train))
    with open(folder / "queries.jsonl", "a", encoding="utf-8") as f:
        for t in train:
            f.write(json.dumps({"_id": f"q{t}", "text": " ".join(_topic(t))}) + "\n")
    for split, chosen in splits:
        lines = ["query-id\tcorpus-id\tscore"] + [f"q{t}\td{t}\t1" for t in chosen]
        (folder / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return str(folder)
