"""`python -m trainer.finetune --task_type reranking`: a cross-encoder trained on labelled
pairs and scored by reranking BM25's candidates on a BEIR folder (trainer/finetuning/
reranker_run.py, trainer/tasks/reranker_data.py).

The fixtures use `finetune_data`'s tiny model (1 layer, hidden 32) over the words w0..w94. The
toy task: each dev query's candidates all hold its word, the relevant one once in a longer
passage (BM25 ranks it last) beside the marker w1, the others twice in short passages; the
training pairs teach that w1 marks the relevant passage, which BM25 cannot see.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.trainer import finetune_data as fd
from tests.trainer.models.test_checkpoints import make_training_dir
from trainer.finetuning import finetune, reranker_run
from trainer.tasks import pairs, reranker_data
from trainer.tasks.retrieval import beir

KIND = "reranking"  # a test may name the kind; trainer/ asks the record


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return fd.export_preset(tmp_path_factory.mktemp("reranker-models"), "roberta")


def write_beir(folder, corpus: dict, queries: dict, qrels: dict, split: str = "dev") -> str:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w") as f:
        f.writelines(json.dumps({"_id": i, "text": t}) + "\n" for i, t in corpus.items())
    with open(folder / "queries.jsonl", "w") as f:
        f.writelines(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries.items())
    with open(folder / "qrels" / f"{split}.tsv", "w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        f.writelines(f"{q}\t{d}\t{g}\n" for q, judged in qrels.items() for d, g in judged.items())
    return str(folder)


def toy_beir(folder, queries: int = 8, split: str = "dev") -> str:
    """Per query 5 candidates sharing its word; the relevant one (w1) ranked last by BM25."""
    corpus, texts, qrels = {}, {}, {}
    for i in range(queries):
        word = f"w{20 + i}"
        texts[f"q{i}"] = f"{word} w{45 + i}"
        corpus[f"d{i}-rel"] = f"{word} w1 w60 w61 w62 w63 w64"
        for k in range(4):
            corpus[f"d{i}-{k}"] = f"{word} {word} w{70 + k}"
        qrels[f"q{i}"] = {f"d{i}-rel": 1}
    return write_beir(folder, corpus, texts, qrels, split)


def toy_pairs(path, count: int = 16, negatives: bool = True) -> str:
    """Training pairs of other words than dev's: the positive holds w1, the negatives not."""
    rows = []
    for i in range(count):
        word = f"w{30 + i % 15}"
        row = {"query": f"{word} w{50 + i % 10}", "positive": f"{word} w1 w6{i % 5} w7{i % 4}"}
        if negatives:
            row["negative"] = [f"{word} {word} w{80 + k} w{85 + i % 5}" for k in range(3)]
        rows.append(row)
    return fd.write(path, rows)


def run(model, tmp_path, train: str, dev: str, *extra) -> int:
    args = ["--model", model, "--task_type", KIND, "--train", train, "--dev", dev]
    args += ["--output_dir", str(tmp_path / "out"), "--batch_size", "16", "--max_length", "16"]
    return finetune.main([*args, *extra])


def assert_cross_encoder_reranks_as_scored(found: dict, dev: str, record: dict) -> None:
    """sentence-transformers' CrossEncoder on the export reranks dev as `record`'s best epoch
    did (results.json `found`)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    nn = pytest.importorskip("torch").nn
    cross = sentence_transformers.CrossEncoder(
        found["export"]["path"], device="cpu", local_files_only=True
    )
    candidates = reranker_data.candidates(dev, "dev", 100)
    logits = cross.predict(list(zip(*candidates.texts())), activation_fn=nn.Identity())
    assert reranker_data.scored(candidates, logits) == pytest.approx(record["dev"], abs=1e-6)


def test_the_command_writes_bm25_before_and_reranked_after_and_a_cross_encoder(
    model, tmp_path, capsys
):
    dev = toy_beir(tmp_path / "beir")
    train = toy_pairs(tmp_path / "pairs.jsonl", negatives=False)
    assert run(model, tmp_path, train, dev, "--seeds", "1", "--epochs", "1") == 0
    out = capsys.readouterr().out
    assert "gives no negatives: mined" in out and "BM25 dev, before reranking its top 100" in out
    found = json.loads((tmp_path / "out" / "results.json").read_text())
    bm25_dev = found["bm25"]["dev"]
    assert found["scores"]["constant_answer_dev"] == bm25_dev
    assert bm25_dev["ndcg@10"] == pytest.approx(1 / math.log2(6))  # the relevant one 5th
    assert bm25_dev["recall@100"] == 1.0 and found["data"]["dev"]["queries"] == 8
    record = found["scores"]["seeds"][0]
    assert set(record["dev"]) == {"ndcg@10", "mrr@10", "recall@100"}
    assert record["dev"]["recall@100"] == 1.0  # reranking keeps BM25's candidates
    assert found["data"]["train"]["mined_negatives"] > 0 and found["protocol"]["pooling"] == "cls"
    assert_cross_encoder_reranks_as_scored(found, dev, record)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_packed_pairs_train_a_modernbert_cross_encoder_that_scores_as_ours(tmp_path, pooling):
    """ModernBERT reads several training pairs a row (`--packing auto`), each pooled apart;
    CrossEncoder on the export reranks dev as the run's best epoch did."""
    model = make_training_dir(str(tmp_path), "modernbert")[0]  # a run: its length recorded
    dev = toy_beir(tmp_path / "beir")
    train = toy_pairs(tmp_path / "pairs.jsonl")
    extra = ("--seeds", "1", "--epochs", "1", "--max_length", "32", "--pooling", pooling)
    assert run(model, tmp_path, train, dev, *extra) == 0
    found = json.loads((tmp_path / "out" / "results.json").read_text())
    assert found["protocol"]["rows"] == "packed"
    assert_cross_encoder_reranks_as_scored(found, dev, found["scores"]["seeds"][0])


@pytest.mark.slow
def test_a_toy_task_reranks_above_bm25_after_training(model, tmp_path):
    dev = toy_beir(tmp_path / "beir")
    train = toy_pairs(tmp_path / "pairs.jsonl")
    assert run(model, tmp_path, train, dev, "--seeds", "1", "--epochs", "6") == 0
    found = json.loads((tmp_path / "out" / "results.json").read_text())
    after = found["scores"]["seeds"][0]["dev"]["ndcg@10"]
    before = found["bm25"]["dev"]["ndcg@10"]
    print(f"toy task: BM25 nDCG@10 {before:.3f}, reranked {after:.3f}")
    assert after > before + 0.3 and not found["scores"]["seeds"][0]["collapsed"]


def test_reranking_scores_equal_a_hand_computation(tmp_path):
    """Two queries, three candidates each, logits given: nDCG@10 and MRR@10 by hand."""
    corpus = {d: f"w1 text of {d}" for d in ("a", "b", "c", "x", "y", "z")}
    folder = write_beir(
        tmp_path / "beir",
        corpus,
        {"q1": "w1", "q2": "w1 text"},
        {"q1": {"a": 2, "b": 1}, "q2": {"z": 1}},
    )
    data = beir.read(folder, "dev")
    found = reranker_data.Candidates(
        data,
        {"q1": [("a", 3.0), ("b", 2.0), ("c", 1.0)], "q2": [("x", 3.0), ("y", 2.0), ("z", 1.0)]},
        (("q1", "a"), ("q1", "b"), ("q1", "c"), ("q2", "x"), ("q2", "y"), ("q2", "z")),
    )
    # q1 reordered c, b, a: DCG 0 + 1/log2(3) + 2/log2(4); ideal 2 + 1/log2(3). q2: z first.
    scores = reranker_data.scored(found, [0.1, 0.5, 0.9, -1.0, -2.0, 4.0])
    q1 = (1 / math.log2(3) + 2 / 2) / (2 + 1 / math.log2(3))
    assert scores["ndcg@10"] == pytest.approx((q1 + 1.0) / 2)
    assert scores["mrr@10"] == pytest.approx((1 / 2 + 1) / 2)
    assert scores["recall@100"] == 1.0
    before = reranker_data.bm25_scores(found)  # a, b first: q1 ideal; z third for q2
    assert before["ndcg@10"] == pytest.approx((1 + 1 / math.log2(4)) / 2)


def test_mining_takes_bm25s_best_but_never_a_querys_own_positive(tmp_path, capsys):
    rows = [
        {"query": "cats purr", "positive": "cats purr loudly"},
        {"query": "cats purr", "positive": "why cats purr"},
        {"query": "dogs bark", "positive": "dogs bark at night"},
        {"query": "birds sing", "positive": "birds sing at dawn"},
        {"query": "fish swim", "positive": "cats and dogs"},
    ]
    given = pairs.read(fd.write(tmp_path / "p.jsonl", rows))
    negatives, ranked, drawn = reranker_data.mine(given, count=2)
    assert ranked + drawn == sum(len(n) for n in negatives)
    for query, own in zip(given.queries, negatives):
        positives = {p for q, p in zip(given.queries, given.positives) if q == query}
        assert not positives & set(own) and len(own) == 2  # "cats purr": neither positive
    assert negatives[0][0] == "cats and dogs"  # shares "cats" with the query: BM25's best
    train = reranker_data.read_train(str(tmp_path / "p.jsonl"))
    assert train.labels.tolist().count(1.0) == 5 and len(train.labels) == 5 + 5 * 3
    assert "mined" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"query": "a", "passage": "b", "label": 2}], "label 2 is not a number from 0"),
        ([{"query": "a", "passage": "b", "label": "yes"}], "label 'yes' is not a number"),
        ([{"query": "a", "passage": " ", "label": 1}], "no non-empty string 'passage'"),
        ([{"query": "a", "passage": "b", "label": 1}] * 2, "every one of its 2 pairs has label 1"),
        ([{"query": "a", "positive": ""}], "an empty 'positive'"),
    ],
)
def test_a_bad_training_file_is_one_line(tmp_path, rows, message):
    with pytest.raises(reranker_data.UserError, match=message):
        reranker_data.read_train(fd.write(tmp_path / "t.jsonl", rows))


def test_bad_input_stops_the_command_in_one_line_before_any_model_loads(model, tmp_path, capsys):
    dev = toy_beir(tmp_path / "beir")
    bad = fd.write(tmp_path / "bad.jsonl", [{"query": "w3", "passage": "w4", "label": 1.5}])
    assert run(model, tmp_path, bad, dev) == 2
    train = toy_pairs(tmp_path / "pairs.jsonl")
    assert run(model, tmp_path, train, dev, "--dev_split", "test") == 2
    assert run(model, tmp_path, train, dev, "--pooling", "mean") == 2  # RoBERTa's head: cls
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 3
    assert "line 1: label 1.5 is not a number from 0" in errors[0]
    assert "split 'test' has no qrels" in errors[1]
    assert "reads the first token only" in errors[2]
    assert not (tmp_path / "out" / "results.json").exists()


def test_build_reads_and_ranks_before_any_model_and_reads_the_first_token(model, tmp_path):
    """The tiny size's default pooling is the mean; a cross-encoder's is the first token."""
    config = _config(model, tmp_path)
    from trainer.finetuning import jobs, recipes

    job = jobs.build(config, recipes.model_size(finetune.resolve_model(model).record))[0]
    assert job.options.rerank_top == 3 and job.settings.pooling == "cls"
    assert all(len(found) <= 3 for found in job.splits["dev"].first.values())
    assert len(job.splits["train"].labels) == 16 * 4


def _config(model, tmp_path):
    from common import flags
    from trainer.finetuning.config import FinetuneFlags

    argv = ["--model", model, "--task_type", KIND, "--output_dir", str(tmp_path / "o")]
    argv += ["--train", toy_pairs(tmp_path / "p.jsonl"), "--dev", toy_beir(tmp_path / "b")]
    return flags.parse(flags.ArgumentParser(), FinetuneFlags, [*argv, "--rerank_top", "3"])


def test_fit_arrays_pad_the_last_batch_with_rows_of_weight_zero():
    class Runtime:
        backend, replicas, num_pipelines, pipeline_id = "tensorflow", 1, 1, 0

        class device:  # noqa: N801
            precision, fused_attention = "fp32", False

    recipe = type("Recipe", (), {"batch_size": 4, "epochs": 1})
    train = ({"token_ids": np.arange(6)[:, None]}, np.array([1, 0, 0, 1, 0, 1], np.float32))
    seeds = reranker_run._Seeds(None, recipe, train, False, Runtime)
    found = seeds.fit_arrays(train, seed=1, epoch=1)
    assert found["x"]["token_ids"].shape == (8, 1) and found["y"].shape == (8, 1)
    assert found["sample_weight"].tolist() == [1] * 6 + [0] * 2
    assert sorted(found["x"]["token_ids"][:6, 0].tolist()) == list(range(6))
