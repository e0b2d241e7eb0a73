"""BM25, the lexical floor printed beside a model's retrieval scores, by the `bm25s` library
(imported when called: it is in the trainer extra, not needed to import this module).

- Text: the document as a model reads it (`beir`: title and text joined).
- Tokens: `bm25s.tokenize`: lowercased, words of two or more word characters (its pattern
  `(?u)\\b\\w\\w+\\b`, scikit-learn's: punctuation and one-letter words dropped), bm25s's
  English stopwords removed (33 words: Lucene's English stop set, what Elasticsearch's
  `english` analyzer drops; BEIR's BM25 ran on Elasticsearch), no stemming. Elasticsearch's
  `english` analyzer also stems (Porter) and BEIR's BM25 matches title and text as separate
  fields: this floor is close to BEIR's BM25 table, not equal to it to the decimal.
- Scoring: k1 = 1.2, b = 0.75 (Lucene's and Elasticsearch's defaults, so BEIR's; bm25s's own
  default k1 is 1.5), method "lucene": idf log(1 + (N - df + 0.5) / (df + 0.5)), term part
  tf / (tf + k1 (1 - b + b dl / avgdl)). A query of stopwords only, or of words no document
  holds, scores every document 0.
- Top k: bm25s's full score vector of each query, then `topk` (ties the greater document id
  first; bm25s's own `retrieve` breaks ties by its partition's chance). Only documents that
  share a word with the query are ranked (score above 0), as Elasticsearch returns only
  matches; bm25s's `retrieve` would fill the k with documents scoring 0.

Example:
    >>> rank({"d1": "cats purr", "d2": "dogs bark"}, {"q1": "why do cats purr"}, k=2)
    {'q1': [('d1', 0.63...)]}
"""

from __future__ import annotations

import numpy as np

from trainer.tasks.retrieval import topk

K1 = 1.2
B = 0.75
METHOD = "lucene"
STOPWORDS = "en"  # bm25s.stopwords.STOPWORDS_EN
_SCORES_AT_ONCE = 1 << 24  # a block of queries' full score vectors: 64 MB of float32


def tokenize(texts, return_ids: bool = True):
    """bm25s's tokens of `texts`: ids and vocabulary (for `index`), or lists of strings."""
    import bm25s

    return bm25s.tokenize(
        list(texts),
        lower=True,
        stopwords=STOPWORDS,
        stemmer=None,
        return_ids=return_ids,
        show_progress=False,
    )


def index(doc_texts):
    """A `bm25s.BM25` of the documents, in their order."""
    import bm25s

    retriever = bm25s.BM25(k1=K1, b=B, method=METHOD)
    retriever.index(tokenize(doc_texts), show_progress=False)
    return retriever


def query_scores(retriever, tokens: list[str]) -> np.ndarray:
    """bm25s's score of every document for one tokenized query (float32)."""
    if not tokens:  # bm25s.BM25.get_scores cannot take an empty query
        return np.zeros(retriever.scores["num_docs"], np.float32)
    return np.asarray(retriever.get_scores(tokens), np.float32)


def rank(corpus: dict, queries: dict, k: int) -> dict:
    """{query id: [(document id, score), ...] best first}: BM25's top k of every query."""
    doc_ids, query_ids = list(corpus), list(queries)
    retriever = index(corpus.values())
    query_tokens = tokenize(queries.values(), return_ids=False)
    ranks, order = topk.tie_ranks(doc_ids)
    block = max(1, _SCORES_AT_ONCE // max(1, len(doc_ids)))
    rankings = {}
    for first in range(0, len(query_ids), block):
        tokens = query_tokens[first : first + block]
        scores = np.stack([query_scores(retriever, t) for t in tokens])
        kept = topk.keep_top(topk.empty(len(tokens)), topk.score_keys(scores, ranks), k)
        indices, top_scores = topk.ranked(kept, order)
        for query_id, row, row_scores in zip(
            query_ids[first:], indices.tolist(), top_scores.tolist()
        ):
            rankings[query_id] = [(doc_ids[i], s) for i, s in zip(row, row_scores) if s > 0]
    return rankings
