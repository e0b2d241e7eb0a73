"""Retrieval evaluation on BEIR's layout, numpy only (no Keras, no TensorFlow): `beir` (a
folder's corpus, queries and one split's judgements, checked), `metrics` (nDCG@k, MRR@k and
recall@k as trec_eval and BEIR compute them), `topk` (a running top-k with one tie rule),
`exact_search` (embeddings' dot products against a corpus encoded in chunks), `bm25` (the
lexical floor, by the `bm25s` library) and `evaluation` (a folder and a ranker into scores).

Every ranking here orders documents by score (as float32, trec_eval's precision), higher
first, and equal scores by document id, the greater id first: what trec_eval does (its
`comp_sim_docno`), hence pytrec_eval and BEIR's nDCG and recall.

Example:
    >>> from trainer.tasks.retrieval import evaluation
    >>> evaluation.bm25_scores("beir/scifact", "test")
    {'ndcg@10': ..., 'mrr@10': ..., 'recall@100': ..., 'queries': 300, ...}
"""
