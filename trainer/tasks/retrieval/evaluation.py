"""A BEIR folder and a ranker into scores: nDCG@10, MRR@10 and recall@k over the split's judged
queries, and how many queries were evaluated and left out.

A ranker is `rank_fn(corpus, queries, k) -> {query id: [(document id, score), ...]}`, corpus
and queries as `beir.RetrievalData` holds them ({id: text}): `exact_search.searcher(...)` for
a model's embeddings, `bm25.rank` for the lexical floor. As BEIR does by default
(`EvaluateRetrieval.evaluate(ignore_identical_ids=True)`), a document whose id is the query's
own is dropped from that query's ranking (ArguAna and Quora hold their queries in the corpus);
the ranker is asked for k + 1 documents so that k remain.

Example:
    >>> evaluate("beir/scifact", "test", exact_search.searcher(encode_q, encode_d))
    {'ndcg@10': ..., 'mrr@10': ..., 'recall@100': ..., 'queries': 300,
     'queries_left_out': 809, 'queries_without_relevant': 0}
    >>> bm25_scores("beir/scifact", "test")
"""

from __future__ import annotations

from trainer.tasks.retrieval import beir, bm25, metrics


def evaluate_data(
    data: beir.RetrievalData, rank_fn, k: int = metrics.RECALL_K, ignore_identical_ids=True
) -> dict:
    """The scores of `rank_fn`'s top k on a split already read."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    rankings = rank_fn(data.corpus, data.queries, k + 1 if ignore_identical_ids else k)
    if ignore_identical_ids:
        rankings = {
            query_id: [(doc_id, score) for doc_id, score in ranking if doc_id != query_id]
            for query_id, ranking in rankings.items()
        }
    scores = metrics.scores(data.qrels, rankings, recall_k=k)  # each cut at its own k
    scores["queries"] = len(data.queries)
    scores["queries_left_out"] = data.queries_left_out
    scores["queries_without_relevant"] = sum(
        not any(grade > 0 for grade in judged.values()) for judged in data.qrels.values()
    )
    return scores


def evaluate(
    folder: str, split: str, rank_fn, k: int = metrics.RECALL_K, ignore_identical_ids=True
) -> dict:
    """The scores of `rank_fn` on split `split` of the BEIR folder `folder`."""
    return evaluate_data(beir.read(folder, split), rank_fn, k, ignore_identical_ids)


def bm25_scores(folder: str, split: str, k: int = metrics.RECALL_K) -> dict:
    """BM25's scores (`bm25`) on the split: the floor a model's scores are printed beside."""
    return evaluate(folder, split, bm25.rank, k)
