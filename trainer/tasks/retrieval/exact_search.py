"""Exact dense retrieval: every query against every document by dot product, the corpus encoded
a chunk at a time, so that no corpus-sized matrix is ever held.

The vectors are compared as they come (a model that wants cosine similarity normalises its
own). Memory: the query vectors (queries x dim), the running top-k (8 bytes a query and kept
document), one chunk's vectors (chunk x dim) and, while one block of queries meets that chunk,
its scores, keys and the partition's work arrays (query block x chunk x about 32 bytes); for
10,000 queries of 768 dimensions and k = 100 at the defaults: about 31 MB, 8 MB, 50 MB and
0.5 GB, whether the corpus holds a thousand passages or ten million. Ties: `topk` (the greater
document id first), so the chunking changes no ranking.

`encode_queries` and `encode_documents` take a list of texts and return one row a text
(a model may prefix or encode queries and documents differently); they are called with at most
`chunk_size` texts, and batch inside as they like.

Example:
    >>> rank = searcher(model.encode_queries, model.encode_documents, chunk_size=8192)
    >>> rank(data.corpus, data.queries, k=100)["q1"][:2]
    [('d7', 0.83...), ('d2', 0.79...)]
"""

from __future__ import annotations

import functools

import numpy as np

from trainer.tasks.retrieval import topk

CHUNK_SIZE = 16_384  # documents encoded, then scored, at a time
QUERY_BLOCK = 1_024  # queries scored against one chunk at a time


def _encoded(encode, texts, what: str) -> np.ndarray:
    vectors = np.asarray(encode(list(texts)), np.float32)
    if vectors.ndim != 2 or len(vectors) != len(texts):
        raise ValueError(
            f"the {what} encoder returned shape {vectors.shape} for {len(texts)} texts; "
            "it must return one row a text"
        )
    return vectors


def encode_all(encode, texts, chunk_size: int = CHUNK_SIZE) -> np.ndarray:
    """One row a text, encoded `chunk_size` texts at a time (the queries: they are kept)."""
    parts = [
        _encoded(encode, texts[start : start + chunk_size], "query")
        for start in range(0, len(texts), chunk_size)
    ]
    return np.concatenate(parts) if parts else np.empty((0, 0), np.float32)


def top_k(
    query_vectors: np.ndarray,
    doc_ids,
    doc_texts,
    encode_documents,
    k: int,
    chunk_size: int = CHUNK_SIZE,
) -> tuple[np.ndarray, np.ndarray]:
    """(document indices, float32 scores), (queries, min(k, documents)), each row best first."""
    ranks, order = topk.tie_ranks(doc_ids)
    blocks = range(0, len(query_vectors), QUERY_BLOCK)
    running = {
        start: topk.empty(len(query_vectors[start : start + QUERY_BLOCK])) for start in blocks
    }
    for start in range(0, len(doc_texts), chunk_size):
        chunk = _encoded(encode_documents, doc_texts[start : start + chunk_size], "document")
        chunk_ranks = ranks[start : start + len(chunk)]
        for first in blocks:
            scores = query_vectors[first : first + QUERY_BLOCK] @ chunk.T
            keys = topk.score_keys(scores, chunk_ranks)
            running[first] = topk.keep_top(running[first], keys, k)
    if not running:
        return np.empty((0, 0), np.int64), np.empty((0, 0), np.float32)
    indices, scores = zip(*(topk.ranked(running[first], order) for first in blocks))
    return np.concatenate(indices), np.concatenate(scores)


def rank(
    corpus: dict, queries: dict, k: int, encode_queries, encode_documents, chunk_size=CHUNK_SIZE
):
    """{query id: [(document id, score), ...] best first}: the top k of every query."""
    doc_ids, query_ids = list(corpus), list(queries)
    query_vectors = encode_all(encode_queries, list(queries.values()), chunk_size)
    indices, scores = top_k(
        query_vectors, doc_ids, list(corpus.values()), encode_documents, k, chunk_size
    )
    return {
        query_id: [(doc_ids[i], float(s)) for i, s in zip(row, row_scores)]
        for query_id, row, row_scores in zip(query_ids, indices.tolist(), scores.tolist())
    }


def searcher(encode_queries, encode_documents, chunk_size: int = CHUNK_SIZE):
    """`rank` with its encoders bound: a `rank_fn(corpus, queries, k)` for `evaluation`."""
    return functools.partial(
        rank,
        encode_queries=encode_queries,
        encode_documents=encode_documents,
        chunk_size=chunk_size,
    )
