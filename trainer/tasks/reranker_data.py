"""The data of a cross-encoder reranker (its loop: trainer/finetuning/reranker_run.py):
labelled (query, passage) training pairs, and BM25's candidates on a BEIR split with the
scores of any reordering of them. numpy and `bm25s` only: nothing here loads a model.

`read_train(path)`: a JSONL file in one of two layouts, told apart by its first row:

- a row with `passage`: labelled rows, `query`, `passage` and `label`, a number from 0 (not
  relevant) to 1 (relevant; between: a soft target);
- otherwise `trainer.tasks.pairs`' layout (`query`, `positive`, optional `negative`s), read
  by `pairs.read`: the pairs (query, positive, 1) and (query, negative, 0). A file without
  negatives gets up to `MINED` a pair from BM25 over the file's own distinct positives, the
  best ranked that are not the query's own positives (nor the query; by `pairs.text_key`),
  and where BM25 matches fewer, others drawn at random from those positives (seeded): one
  printed line says how many of each.

Labels that are all equal are refused (nothing to tell apart), as is every malformed line, in
one line naming the file and line (`UserError`).

`candidates(folder, split, top)`: the BEIR split (`retrieval.beir.read`) and BM25's top `top`
of each judged query, a document whose id is the query's own left out (BEIR's
`ignore_identical_ids`). `scored(found, logits)`: nDCG@10, MRR@10 and recall@100
(`retrieval.metrics`) of the candidates reordered by one logit a pair, so recall@100 is
BM25's own whenever `top` is 100 or more; `bm25_scores(found)`: the same of BM25's order.

Example:
    >>> train = read_train("train.jsonl")        # labelled pairs; mined negatives said
    >>> dev = candidates("beir/scifact", "dev", top=100)
    >>> scored(dev, np.zeros(len(dev.ids))), bm25_scores(dev)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from common import fs
from common.errors import UserError
from trainer.tasks import json_lines, pairs
from trainer.tasks.retrieval import beir, bm25, metrics

MINED = 3  # BM25 negatives a pair (sentence-transformers' mine_hard_negatives: 3 by default)


@dataclasses.dataclass(frozen=True)
class Labelled:
    """Training pairs: `texts` (queries) and `pairs` (passages), as `datasets.Split` names
    the two texts of a pair, with a label each; `mined` negatives came from BM25."""

    path: str
    texts: tuple
    pairs: tuple
    labels: np.ndarray  # float32, 0..1
    mined: int = 0


@dataclasses.dataclass(frozen=True)
class Candidates:
    """One BEIR split and BM25's candidates: `first` {query id: [(document id, score)]} and
    `ids`, every (query id, document id) to score, in that order."""

    data: beir.RetrievalData
    first: dict
    ids: tuple

    def texts(self) -> tuple[list, list]:
        """(queries, passages), one a pair to score."""
        queries = [self.data.queries[query] for query, _ in self.ids]
        return queries, [self.data.corpus[document] for _, document in self.ids]


def _text(path: str, number: int, row: dict, name: str) -> str:
    value = row.get(name)
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{path} line {number} has no non-empty string {name!r}")
    return value.strip()


def _label(path: str, number: int, row: dict) -> float:
    value = row.get("label")
    number_given = isinstance(value, int | float) and not isinstance(value, bool)
    if not number_given or not 0 <= value <= 1:  # NaN fails the comparison too
        shown = json_lines.one_line(repr(value))[:40]
        raise UserError(
            f"{path} line {number}: label {shown} is not a number from 0 (not relevant) to 1"
        )
    return float(value)


def _read_labelled(path: str) -> Labelled:
    queries, passages, labels = [], [], []
    for number, row in json_lines.rows(path):
        queries.append(_text(path, number, row, "query"))
        passages.append(_text(path, number, row, "passage"))
        labels.append(_label(path, number, row))
    return Labelled(path, tuple(queries), tuple(passages), np.asarray(labels, np.float32))


def _drawn(rng, everything: list, excluded: set, need: int) -> list:
    """Up to `need` keys of `everything` at random, none in `excluded` (a few tries each:
    a small corpus may give fewer, never a wait)."""
    chosen = []
    for index in rng.integers(0, len(everything), 4 * (need + len(excluded))).tolist():
        if len(chosen) == need:
            break
        if everything[index] not in excluded and everything[index] not in chosen:
            chosen.append(everything[index])
    return chosen


def mine(found: pairs.Pairs, count: int = MINED, seed: int = 0) -> tuple[list, int, int]:
    """(per pair its negatives, how many BM25 ranked, how many were drawn at random)."""
    key = pairs.text_key
    corpus = {key(text): text for text in found.positives}  # the distinct positives
    own = {}  # per query: its own texts, never its negatives
    for query, positive in zip(found.queries, found.positives):
        own.setdefault(key(query), {key(query)}).add(key(positive))
    queries = {key(query): query for query in found.queries}
    widest = max(len(keys) for keys in own.values())
    ranked = bm25.rank(corpus, queries, count + widest)
    rng, everything = np.random.default_rng(seed), list(corpus)
    negatives, from_bm25, drawn = [], 0, 0
    for query in map(key, found.queries):
        best = [d for d, _ in ranked.get(query, ()) if d not in own[query]][:count]
        extra = _drawn(rng, everything, own[query] | set(best), count - len(best))
        from_bm25, drawn = from_bm25 + len(best), drawn + len(extra)
        negatives.append([corpus[d] for d in best + extra])
    return negatives, from_bm25, drawn


def read_train(path: str) -> Labelled:
    """The training file as labelled pairs (module docstring); refuses one without contrast."""
    if not fs.exists(path):
        raise UserError(f"{path} is missing: --train is a JSONL file of (query, passage) pairs")
    first = next((row for _, row in json_lines.rows(path)), {})
    if "passage" in first:
        found = _read_labelled(path)
    else:
        given = pairs.read(path)
        negatives, mined = given.negatives, 0
        if not given.hard_negatives:
            negatives, mined, drawn = mine(given)
            print(
                f"{path} gives no negatives: mined {mined} with BM25 over its "
                f"{len(set(given.positives))} positives ({MINED} a pair at most) and drew "
                f"{drawn} more at random where BM25 matched fewer",
                flush=True,
            )
        rows = [(q, p, 1.0) for q, p in zip(given.queries, given.positives)]
        rows += [(q, n, 0.0) for q, its in zip(given.queries, negatives) for n in its]
        queries, passages, labels = zip(*rows)
        found = Labelled(path, queries, passages, np.asarray(labels, np.float32), mined)
    if found.labels.min() == found.labels.max():
        raise UserError(
            f"{path}: every one of its {len(found.labels)} pairs has label "
            f"{found.labels[0]:g}; a reranker learns from relevant and irrelevant pairs both"
        )
    return found


def candidates(folder: str, split: str, top: int) -> Candidates:
    """The split read and BM25's top `top` of each judged query (its own id left out)."""
    data = beir.read(folder, split)
    ranked = bm25.rank(data.corpus, data.queries, top + 1)
    first = {q: [(d, s) for d, s in ranked.get(q, ()) if d != q][:top] for q in data.queries}
    if not any(first.values()):
        raise UserError(
            f"{folder} split {split}: BM25 finds no document sharing a word with any of its "
            f"{len(first)} judged queries: nothing to rerank"
        )
    return Candidates(data, first, tuple((q, d) for q, found in first.items() for d, _ in found))


def scored(found: Candidates, logits) -> dict:
    """{ndcg@10, mrr@10, recall@100} of the candidates reordered by `logits` (one a pair)."""
    rankings = {query: [] for query in found.first}
    for (query, document), logit in zip(found.ids, np.asarray(logits, np.float32).tolist()):
        rankings[query].append((document, logit))
    return metrics.scores(found.data.qrels, rankings)


def bm25_scores(found: Candidates) -> dict:
    """BM25's own scores of the candidates: the list before reranking."""
    return metrics.scores(found.data.qrels, found.first)
