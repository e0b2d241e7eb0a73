"""Ranking scores as trec_eval computes them (pytrec_eval, hence BEIR's nDCG and recall), and
MRR as BEIR's `custom_metrics.mrr` does; numpy only.

- ndcg@k: DCG@k / ideal DCG@k, DCG = sum over ranks i = 1..k of gain_i / log2(i + 1), the gain
  the grade itself (linear, not 2^grade - 1: trec_eval's `ndcg_cut`, m_ndcg_cut.c), 0 for a
  grade of 0 or below or a document not judged. The ideal ranks every document of the query
  judged above 0 (retrieved or not) by grade. No such document: 0.
- mrr@k: 1 / the rank of the first document graded above 0 within the top k; else 0.
- recall@k: documents graded above 0 within the top k / all graded above 0 (trec_eval's
  `recall` at relevance level 1); no such document: 0.

Each is averaged over every judged query (the qrels' keys): a query with no ranking, or an
empty one, scores 0 (pytrec_eval would leave it out of BEIR's mean). A ranking is
{query id: [(document id, score), ...]} in any order: it is sorted here by score as float32,
higher first, equal scores the greater document id first (trec_eval's `comp_sim_docno`;
BEIR's MRR keeps its dict's order instead). Values are not rounded (BEIR rounds to 5 places).

Example:
    >>> qrels = {"q1": {"d1": 2, "d2": 1}}
    >>> scores(qrels, {"q1": [("d2", 0.9), ("d3", 0.5), ("d1", 0.1)]}, recall_k=2)
    {'ndcg@10': 0.7601..., 'mrr@10': 1.0, 'recall@2': 0.5}
"""

from __future__ import annotations

import numpy as np

NDCG_K = 10
MRR_K = 10
RECALL_K = 100
# The scores `scores` reports at the default cuts, the first the one that selects an epoch.
NAMES = (f"ndcg@{NDCG_K}", f"mrr@{MRR_K}", f"recall@{RECALL_K}")


def ordered(ranking) -> list[str]:
    """Document ids by score (float32), higher first, ties the greater id first."""
    if not ranking:
        return []
    ids = [doc_id for doc_id, _ in ranking]
    if len(set(ids)) != len(ids):  # trec_eval refuses a run naming a document twice
        raise ValueError("a ranking names a document twice")
    scores = np.asarray([score for _, score in ranking], np.float32).tolist()
    pairs = sorted(zip(scores, ids), reverse=True)  # (score, id) descending: ties id-descending
    return [doc_id for _, doc_id in pairs]


def _gain(grade: int) -> int:
    return max(grade, 0)


def _dcg(gains) -> float:
    gains = np.asarray(gains, np.float64)
    return float(np.sum(gains / np.log2(np.arange(2, len(gains) + 2))))


def ndcg(ranked_ids, judged: dict, k: int) -> float:
    ideal = _dcg(sorted((_gain(g) for g in judged.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return _dcg([_gain(judged.get(doc_id, 0)) for doc_id in ranked_ids[:k]]) / ideal


def mrr(ranked_ids, judged: dict, k: int) -> float:
    for rank, doc_id in enumerate(ranked_ids[:k], start=1):
        if judged.get(doc_id, 0) > 0:
            return 1.0 / rank
    return 0.0


def recall(ranked_ids, judged: dict, k: int) -> float:
    relevant = {doc_id for doc_id, grade in judged.items() if grade > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked_ids[:k])) / len(relevant)


def scores(
    qrels: dict, rankings: dict, ndcg_k: int = NDCG_K, mrr_k: int = MRR_K, recall_k: int = RECALL_K
) -> dict:
    """{'ndcg@K': ..., 'mrr@K': ..., 'recall@K': ...}, each the mean over qrels' queries."""
    if not qrels:
        raise ValueError("no judged query to score")
    sums = {f"ndcg@{ndcg_k}": 0.0, f"mrr@{mrr_k}": 0.0, f"recall@{recall_k}": 0.0}
    for query_id, judged in qrels.items():
        ranked_ids = ordered(rankings.get(query_id, ()))
        sums[f"ndcg@{ndcg_k}"] += ndcg(ranked_ids, judged, ndcg_k)
        sums[f"mrr@{mrr_k}"] += mrr(ranked_ids, judged, mrr_k)
        sums[f"recall@{recall_k}"] += recall(ranked_ids, judged, recall_k)
    return {name: total / len(qrels) for name, total in sums.items()}
