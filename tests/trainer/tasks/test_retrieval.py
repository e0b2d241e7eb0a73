"""Retrieval evaluation on BEIR's layout: the scores against values worked out by hand, exact
search in chunks against brute force, BM25 against bm25s called directly, and every bad input
as one line naming its file. Tiny fixtures, written here; offline."""

import json
import math

import numpy as np
import pytest

from common.errors import UserError, run_cli
from trainer.tasks.retrieval import beir, bm25, evaluation, exact_search, metrics, topk

# ---------------------------------------------------------------------------------------------
# metrics


def test_scores_equal_the_hand_computed_values():
    qrels = {
        "q1": {"d1": 2, "d2": 1, "d3": 0},  # graded; d3 judged not relevant
        "q2": {"d4": 1},  # its relevant document is never retrieved
        "q3": {"d6": 1},  # its ranking is one three-way tie
    }
    rankings = {
        "q1": [("d2", 0.6), ("d1", 0.8), ("d3", 0.9), ("dx", 0.7)],  # any order: sorted here
        "q2": [("d5", 0.5), ("d6", 0.4)],
        "q3": [("d5", 0.5), ("d6", 0.5), ("d7", 0.5)],
    }
    # q1, by score: d3 (grade 0), d1 (2), dx (not judged), d2 (1). Linear gains (trec_eval):
    #   DCG  = 0/log2(2) + 2/log2(3) + 0/log2(4) + 1/log2(5) = 1.26186 + 0.43068 = 1.69254
    #   IDCG = 2/log2(2) + 1/log2(3)                         = 2 + 0.63093     = 2.63093
    #   nDCG = 0.64333; MRR: first grade > 0 is d1 at rank 2 -> 1/2;
    #   recall@3: d3, d1, dx hold d1 of {d1, d2} -> 1/2.
    q1_ndcg = (2 / math.log2(3) + 1 / math.log2(5)) / (2 + 1 / math.log2(3))
    # q2: d4 not retrieved -> nDCG 0, MRR 0, recall 0.
    # q3: a tie ranks the greater id first: d7, d6, d5 -> d6 at rank 2:
    #   nDCG = (1/log2(3)) / (1/log2(2)) = 0.63093; MRR 1/2; recall@3 1.
    q3_ndcg = 1 / math.log2(3)
    got = metrics.scores(qrels, rankings, recall_k=3)
    assert got == pytest.approx(
        {
            "ndcg@10": (q1_ndcg + 0 + q3_ndcg) / 3,  # (0.64333 + 0 + 0.63093) / 3 = 0.42475
            "mrr@10": (1 / 2 + 0 + 1 / 2) / 3,  # 1/3
            "recall@3": (1 / 2 + 0 + 1) / 3,  # 1/2
        }
    )
    assert q1_ndcg == pytest.approx(0.64333, abs=1e-5)


def test_each_score_stops_at_its_cutoff():
    # The relevant document is 11th: out of nDCG@10 and MRR@10, inside recall@100.
    ranking = [(f"n{i:02d}", 1.0 - i / 100) for i in range(10)] + [("rel", 0.5)]
    got = metrics.scores({"q": {"rel": 1}}, {"q": ranking})
    assert got == {"ndcg@10": 0.0, "mrr@10": 0.0, "recall@100": 1.0}


def test_a_query_without_ranking_or_relevant_document_scores_zero():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 0}}  # q1 gets no ranking; q2 has no relevant doc
    got = metrics.scores(qrels, {"q2": [("d2", 1.0)]})
    assert got == {"ndcg@10": 0.0, "mrr@10": 0.0, "recall@100": 0.0}


def test_ties_are_broken_by_document_id_descending_at_float32():
    # 0.1 and 0.1 + 1e-12 are one float32: a tie, so "b" (the greater id) comes first.
    assert metrics.ordered([("a", 0.1 + 1e-12), ("b", 0.1), ("c", 0.2)]) == ["c", "b", "a"]
    with pytest.raises(ValueError, match="twice"):
        metrics.ordered([("a", 1.0), ("a", 0.5)])


# ---------------------------------------------------------------------------------------------
# exact search


def _brute_force(query_vectors, doc_vectors, doc_ids, k):
    """Every score at once; (score, id) descending: the greater id first on a tie."""
    scores = (query_vectors @ doc_vectors.T).astype(np.float32)
    return [
        [
            (doc_ids[i], float(s))
            for s, _, i in sorted(zip(row, doc_ids, range(len(doc_ids))))[::-1]
        ][:k]
        for row in scores
    ]


def _encoder(vectors, texts, calls):
    rows = {text: i for i, text in enumerate(texts)}

    def encode(batch):
        calls.append(len(batch))
        return vectors[[rows[text] for text in batch]]

    return encode


@pytest.mark.parametrize("k", [1, 12, 80])
def test_exact_search_in_chunks_equals_brute_force_with_ties(monkeypatch, k):
    rng = np.random.default_rng(0)
    # Small integers: every dot product is exact, and equal scores are many (ties).
    doc_vectors = rng.integers(-2, 3, (50, 4)).astype(np.float32)
    doc_vectors[31] = doc_vectors[7]  # a planted tie: two documents, one vector
    query_vectors = rng.integers(-2, 3, (7, 4)).astype(np.float32)
    doc_ids = [f"doc{n}" for n in rng.permutation(50)]  # id order is not file order
    doc_texts = [f"text {i}" for i in range(50)]
    query_texts = [f"query {i}" for i in range(7)]
    calls = []
    monkeypatch.setattr(exact_search, "QUERY_BLOCK", 3)  # several query blocks too
    rank = exact_search.searcher(
        _encoder(query_vectors, query_texts, []),
        _encoder(doc_vectors, doc_texts, calls),
        chunk_size=7,  # 50 documents: 8 chunks, the last of 1
    )
    got = rank(dict(zip(doc_ids, doc_texts)), {f"q{i}": t for i, t in enumerate(query_texts)}, k)
    expected = _brute_force(query_vectors, doc_vectors, doc_ids, k)
    assert [got[f"q{i}"] for i in range(7)] == expected
    assert max(calls) == 7 and sum(calls) == 50  # never more than a chunk at once
    planted = {doc_ids[7], doc_ids[31]}
    for ranking in got.values():  # the planted pair, when kept, sits in id order
        kept = [doc for doc, _ in ranking if doc in planted]
        assert kept == sorted(kept, reverse=True)


def test_exact_search_on_float_vectors_matches_argsort():
    rng = np.random.default_rng(1)
    docs = rng.normal(size=(300, 16)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries = rng.normal(size=(5, 16)).astype(np.float32)
    ids = [f"d{i:03d}" for i in range(300)]
    indices, scores = exact_search.top_k(
        queries, ids, ids, lambda t: docs[[ids.index(x) for x in t]], 10, 64
    )
    full = queries.astype(np.float64) @ docs.T.astype(np.float64)
    assert (indices == np.argsort(-full, axis=1)[:, :10]).all()
    np.testing.assert_allclose(scores, np.sort(full, axis=1)[:, ::-1][:, :10], rtol=1e-5)


def test_topk_keys_order_signed_scores_and_send_nan_last():
    ranks, order = topk.tie_ranks(["a", "b", "c", "d", "e"])
    scores = np.array([[-1.5, np.nan, 0.0, -0.0, 2.0]], np.float32)
    indices, kept = topk.ranked(
        topk.keep_top(topk.empty(1), topk.score_keys(scores, ranks), 5), order
    )
    # 2.0 (e); 0.0 and -0.0 tie: d before c; -1.5 (a); NaN (b) last, as -inf.
    assert indices.tolist() == [[4, 3, 2, 0, 1]]
    assert kept[0, :4].tolist() == [2.0, 0.0, 0.0, -1.5] and kept[0, 4] == -np.inf


def test_an_encoder_returning_the_wrong_shape_is_named():
    with pytest.raises(ValueError, match="document encoder returned shape"):
        exact_search.top_k(np.ones((1, 2)), ["a"], ["x"], lambda t: np.ones((2, 2)), 1)


# ---------------------------------------------------------------------------------------------
# BM25

DOCS = {
    "d1": "The cat sat on the mat and purred.",
    "d2": "Dogs bark loudly at the mailman.",
    "d3": "Photosynthesis converts sunlight into chemical energy in plants.",
    "d4": "The stock market fell sharply on Monday.",
    "d5": "Volcanoes erupt molten lava and ash.",
    "d6": "Bees make honey from flower nectar.",
}
QUERIES = {
    "q1": "a cat on the mat",
    "q2": "why do dogs bark",
    "q3": "sunlight and photosynthesis in plants",
    "q4": "stock market news",
    "q5": "lava from volcanoes",
    "q6": "honey bees",
}


def test_bm25_ranks_the_matching_document_first_with_bm25s_own_scores():
    import bm25s

    got = bm25.rank(DOCS, QUERIES, k=6)
    assert [got[q][0][0] for q in QUERIES] == list(DOCS)
    # bm25s called directly, with the same settings: the same score for every document.
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index(bm25s.tokenize(list(DOCS.values()), stopwords="en", show_progress=False))
    tokens = bm25s.tokenize(list(QUERIES.values()), stopwords="en", show_progress=False)
    found, scores = retriever.retrieve(tokens, k=6, show_progress=False)
    doc_ids = list(DOCS)
    for row, (query_id, row_docs, row_scores) in enumerate(zip(QUERIES, found, scores)):
        direct = {doc_ids[i]: float(s) for i, s in zip(row_docs, row_scores) if s > 0}
        assert dict(got[query_id]) == direct, row


def test_bm25_of_stopwords_or_unknown_words_retrieves_nothing():
    assert bm25.rank(DOCS, {"q": "the and of", "r": "zebra"}, k=3) == {"q": [], "r": []}


# ---------------------------------------------------------------------------------------------
# BEIR folders


def _jsonl(rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def _folder(tmp_path, corpus=None, queries=None, qrels=None, split="test"):
    """A BEIR folder: BM25's six documents and queries, each query judging its document."""
    if corpus is None:
        corpus = _jsonl({"_id": k, "title": "", "text": v} for k, v in DOCS.items())
    if queries is None:
        queries = _jsonl({"_id": k, "text": v} for k, v in [*QUERIES.items(), ("q7", "unjudged")])
    if qrels is None:
        qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(1, 7))
    (tmp_path / "qrels").mkdir(exist_ok=True)
    for name, text in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        if text is not False:
            (tmp_path / name).write_text(text, encoding="utf-8")
    if qrels is not False:
        (tmp_path / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")
    return str(tmp_path)


def test_a_folder_reads_in_file_order_with_beirs_title_join(tmp_path):
    corpus = (  # a byte-order mark, CRLF, a blank line, an integer _id, a title alone
        '\ufeff{"_id": 7, "title": "Cats", "text": " purr "}\r\n\n{"_id": "d2", "text": "bark"}\n'
        '{"_id": "d3", "title": "Only a title", "text": ""}\n'
    )
    queries = _jsonl(
        [{"_id": "q2", "text": "b"}, {"_id": "q1", "text": "a"}, {"_id": "q3", "text": "c"}]
    )
    qrels = "query-id\tcorpus-id\tscore\r\nq1\t7\t2\r\nq2\td2\t0\r\nq1\td2\t1\r\nq1\t7\t1\r\n"
    data = beir.read(_folder(tmp_path, corpus, queries, qrels), "test")
    # (title + " " + text).strip(), as BEIR's models read a document
    assert data.corpus == {"7": "Cats  purr", "d2": "bark", "d3": "Only a title"}
    assert list(data.queries) == ["q2", "q1"] and data.queries_left_out == 1
    assert data.qrels == {"q1": {"7": 1, "d2": 1}, "q2": {"d2": 0}}  # a repeated pair: the last


def test_evaluate_scores_the_judged_queries_and_counts_the_rest(tmp_path):
    folder = _folder(tmp_path)
    got = evaluation.bm25_scores(folder, "test", k=3)
    assert got == {
        "ndcg@10": 1.0,
        "mrr@10": 1.0,
        "recall@3": 1.0,
        "queries": 6,
        "queries_left_out": 1,  # q7 has no judgement in the split
        "queries_without_relevant": 0,
    }


def test_a_document_with_the_query_id_is_dropped_as_beir_does(tmp_path):
    asked = []

    def rank_fn(corpus, queries, k):
        asked.append(k)
        return {q: [(q, 9.0), ("d1", 1.0)] for q in queries}  # as if q1 were in the corpus

    data = beir.read(_folder(tmp_path), "test")
    assert evaluation.evaluate_data(data, rank_fn, k=2)["mrr@10"] == pytest.approx(1 / 6)
    kept = evaluation.evaluate_data(data, rank_fn, k=2, ignore_identical_ids=False)
    assert kept["mrr@10"] == pytest.approx(1 / 12)  # q1: d1 second
    assert asked == [3, 2]


GOOD_DOC = '{"_id": "d1", "text": "x"}\n'
HEADER = "query-id\tcorpus-id\tscore\n"
BAD = {
    "missing corpus": (dict(corpus=False), "corpus.jsonl is missing"),
    "missing queries": (dict(queries=False), "queries.jsonl is missing"),
    "missing split": (dict(qrels=False), "test.tsv is missing: split 'test' has no qrels"),
    "not json": (dict(corpus=GOOD_DOC + "{oops\n"), "corpus.jsonl line 2 is not JSON"),
    "not an object": (dict(corpus="[1, 2]\n"), "corpus.jsonl line 1 is not a JSON object"),
    "no _id": (dict(corpus='{"text": "x"}\n'), "corpus.jsonl line 1 has no _id"),
    "empty _id": (dict(queries='{"_id": "", "text": "x"}\n'), "queries.jsonl line 1 has _id ''"),
    "no text": (dict(corpus='{"_id": "d1", "title": "t"}\n'), "corpus.jsonl line 1 has no 'text'"),
    "empty doc": (
        dict(corpus='{"_id": "d1", "title": " ", "text": ""}\n'),
        "corpus.jsonl line 1 ('d1') has an empty title and text",
    ),
    "empty query": (
        dict(queries='{"_id": "q1", "text": "  "}\n'),
        "queries.jsonl line 1 ('q1') has an empty text",
    ),
    "duplicate doc": (dict(corpus=GOOD_DOC * 2), "corpus.jsonl line 2 repeats _id 'd1'"),
    "duplicate query": (
        dict(queries='{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n'),
        "queries.jsonl line 2 repeats _id 'q1'",
    ),
    "columns": (dict(qrels=HEADER + "q1\td1\n"), "test.tsv line 2 has 2 columns, not 3"),
    "score": (
        dict(qrels=HEADER + "q1\td1\t1.5\n"),
        "test.tsv line 2: score '1.5' is not an integer",
    ),
    "unknown ids": (
        dict(qrels=HEADER + "q1\td1\t1\nq9\td8\t1\nq1\td9\t0\nq9\td9\t1\n"),
        "test.tsv names 1 query id(s) not in queries.jsonl (first 'q9', line 3) and 2 document "
        "id(s) not in corpus.jsonl (first 'd8', line 3)",
    ),
    "no judgements": (dict(qrels=HEADER), "test.tsv holds no judgements"),
    "no header": (dict(qrels="q1\td1\t1\n"), "test.tsv line 1 is 'q1\\td1\\t1', not the header"),
    "empty qrels": (dict(qrels=""), "test.tsv is empty"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_naming_the_file(tmp_path, case):
    changes, message = BAD[case]
    folder = _folder(tmp_path, **changes)
    with pytest.raises(UserError) as caught:
        beir.read(folder, "test")
    text = str(caught.value)
    assert "\n" not in text and message in text, text
    assert str(tmp_path) in text  # the file, by its path


def test_bytes_that_are_not_utf8_are_one_line(tmp_path):
    folder = _folder(tmp_path)
    (tmp_path / "corpus.jsonl").write_bytes(b'{"_id": "d1", "text": "caf\xe9"}\n')
    with pytest.raises(UserError, match=r"corpus.jsonl line 1 is not JSON") as caught:
        beir.read(folder, "test")
    assert "\n" not in str(caught.value)


def test_a_command_reading_a_bad_folder_prints_one_line_and_exits_2(tmp_path, capsys):
    folder = _folder(tmp_path, qrels=HEADER + "q1\tnope\t1\n")
    assert run_cli(lambda: beir.read(folder, "test"), []) == 2
    assert capsys.readouterr().err.count("\n") == 1
