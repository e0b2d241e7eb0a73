"""`trainer.finetune --task_type embedding` end to end on tiny models: contrastive training on
pairs, exact search on a BEIR folder with BM25 beside, the best seed written as a
sentence-transformers folder that scores as our model did, gradient caching trained as the
whole batch, and bad input as one line. One fine-tune is ~10 s on TensorFlow, ~15 s on JAX."""

import json
import os

import pytest

from common import fs
from tests.trainer import retrieval_data as rd
from tests.trainer.models.test_checkpoints import make_training_dir
from trainer.finetuning import finetune
from trainer.tasks.retrieval import beir, evaluation, exact_search

TENSORFLOW_ONLY = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax", reason="the JAX pass runs the other families"
)
TRAIN, JUDGED = range(0, 33), list(range(33, 45))


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("embedding-task")
    return {
        "pairs": rd.write_pairs(root / "pairs.jsonl", TRAIN),
        "negatives": rd.write_pairs(root / "negatives.jsonl", TRAIN, negatives=1),
        "beir": rd.write_beir(root / "beir", JUDGED, train=list(TRAIN)),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("embedding-runs"))
    return lambda family: _run(root, family)


def _run(root: str, family: str, dropout: float | None = None) -> str:
    folder = os.path.join(root, f"run-{family}")
    if not os.path.exists(folder):
        make_training_dir(root, family)
    if dropout is not None:  # a copy of the run without dropout
        path = os.path.join(folder, "run_config.json")
        config = fs.read_json(path)
        config["backbone_config"]["dropout"] = dropout
        fs.write_json(path, config)
    return folder


def _finetune(model, out, train, dev, *extra) -> int:
    return finetune.main(
        ["--model", model, "--task_type", "embedding", "--train", train, "--dev", dev,
         "--test", dev, "--output_dir", str(out), "--seeds", "1", "--epochs", "2",
         "--batch_size", "8", "--learning_rate", "1e-3", *extra]
    )  # fmt: skip


def _st_scores(folder: str, beir_folder: str, split: str) -> dict:
    import sentence_transformers

    model = sentence_transformers.SentenceTransformer(folder, device="cpu", local_files_only=True)

    def encode(texts):
        return model.encode(list(texts), batch_size=16, convert_to_numpy=True)

    data = beir.read(beir_folder, split)
    return evaluation.evaluate_data(data, exact_search.searcher(encode, encode))


@pytest.mark.parametrize(
    "family",
    [
        pytest.param("roberta", marks=TENSORFLOW_ONLY),
        pytest.param("bert", marks=pytest.mark.slow),
        "modernbert",
    ],
)
def test_the_command_trains_scores_and_writes_a_model_that_scores_alike(
    task, runs, tmp_path, family, capsys
):
    assert _finetune(runs(family), tmp_path, task["negatives"], task["beir"]) == 0
    printed = capsys.readouterr().out
    assert "BM25 dev: ndcg@10" in printed and "best seed's model" in printed
    document = json.loads((tmp_path / "results.json").read_text())
    record = document["scores"]["seeds"][0]
    assert [e["epoch"] for e in record["epochs"]] == [1, 2]
    assert document["data"]["train"]["hard_negatives"] == 1
    assert set(document["bm25"]) == {"dev", "test"}
    assert document["protocol"]["temperature"] == 0.05
    assert document["protocol"]["pooling"] == "mean"
    # sentence-transformers, on the folder written, ranks as our model did at its best epoch.
    theirs = _st_scores(document["export"], task["beir"], "dev")
    for name, ours in record["dev"].items():
        assert theirs[name] == pytest.approx(ours, abs=1e-6), name


def test_beir_train_judgements_train_and_the_card_gets_retrieval_scores(task, runs, tmp_path):
    from trainer.release import export

    card = str(tmp_path / "export")
    export.export(runs("bert"), card, "hf")
    out = tmp_path / "out"
    assert (
        _finetune(runs("bert"), out, task["beir"], task["beir"], "--epochs", "1", "--card", card)
        == 0
    )
    document = json.loads((out / "results.json").read_text())
    assert document["data"]["train"]["examples"] == len(TRAIN)
    readme = (tmp_path / "export" / "README.md").read_text()
    assert "type: ndcg_at_10" in readme and "type: sentence-similarity" in readme
    ndcg = document["scores"]["summary"]["dev"]["ndcg@10"]["mean"]
    assert f"value: {round(ndcg, 4)}" in readme


def test_packed_rows_and_gradient_caching_train_as_the_padded_whole_batch(task, tmp_path):
    """A ModernBERT (no dropout) trained on padded rows in one pass, on packed rows (several
    texts a row, `--packing auto`) and on packed chunks of 2 pairs (gradient caching): the
    same losses and the same dev scores, to float32 rounding."""
    model = _run(str(tmp_path), "modernbert", dropout=0.0)
    found = {}
    runs = {
        "padded": ("--packing", "off"),
        "packed": (),
        "chunked": ("--gradient_chunk", "2"),
    }
    for name, extra in runs.items():
        out = tmp_path / name
        assert _finetune(model, out, task["negatives"], task["beir"], "--epochs", "1", *extra) == 0
        found[name] = json.loads((out / "results.json").read_text())
    assert [found[name]["protocol"]["rows"] for name in runs] == ["padded", "packed", "packed"]
    padded = found["padded"]["scores"]["seeds"][0]["epochs"][0]
    for name in ("packed", "chunked"):
        epoch = found[name]["scores"]["seeds"][0]["epochs"][0]
        assert epoch["train_loss"] == pytest.approx(padded["train_loss"], rel=1e-4), name
        assert epoch["dev"]["ndcg@10"] == pytest.approx(padded["dev"]["ndcg@10"], abs=1e-4), name


@TENSORFLOW_ONLY
@pytest.mark.parametrize(
    "extra, said",
    [
        (("--gradient_chunk", "3"), "--gradient_chunk 3 does not divide the batch of 8 pairs"),
        (("--batch_size", "64"), "fewer than one batch of 64"),
        (("--packing", "on"), "--packing on: a roberta model reads one text a row"),
    ],
)
def test_bad_flags_are_one_line(task, runs, tmp_path, capsys, extra, said):
    assert _finetune(runs("roberta"), tmp_path, task["pairs"], task["beir"], *extra) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1


@TENSORFLOW_ONLY
def test_a_pair_without_a_positive_is_one_line(task, runs, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "a b"}\n')
    assert _finetune(runs("roberta"), tmp_path / "out", str(bad), task["beir"]) == 2
    err = capsys.readouterr().err.strip()
    assert "line 1" in err and "positive" in err and len(err.splitlines()) == 1


@TENSORFLOW_ONLY
def test_pairs_may_come_from_a_dataset_in_sentence_transformers_column_order(task, runs, tmp_path):
    """A DatasetDict (here saved to disk; a Hub name loads the same way) whose columns are
    anchor and positive: the first is the query, the second the positive."""
    import datasets

    rows = [json.loads(line) for line in open(task["pairs"], encoding="utf-8")]
    columns = {"anchor": [r["query"] for r in rows], "positive": [r["positive"] for r in rows]}
    folder = str(tmp_path / "dataset")
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(columns)}).save_to_disk(folder)
    out = tmp_path / "out"
    args = ["--model", runs("roberta"), "--task_type", "embedding", "--hf_dataset", folder,
            "--dev", task["beir"], "--output_dir", str(out), "--seeds", "1", "--epochs", "1",
            "--batch_size", "8"]  # fmt: skip
    assert finetune.main(args) == 0
    document = json.loads((out / "results.json").read_text())
    assert document["data"]["train"]["examples"] == len(rows)
    assert document["data"]["train"]["path"].endswith("train")


@pytest.fixture
def one_device_afterwards():
    """DataParallel is Keras' process-wide state: later tests must not build under it."""
    yield
    if os.environ.get("KERAS_BACKEND") == "jax":
        import keras

        keras.distribution.set_distribution(None)


def test_two_devices_train_as_one_on_jax_and_are_refused_on_tensorflow(
    task, tmp_path, capsys, one_device_afterwards
):
    """JAX: DataParallel over two CPU devices, each batch laid out by the distribution, the
    loss over the whole batch: the same scores as one device. TensorFlow: one line."""
    model = _run(str(tmp_path), "roberta", dropout=0.0)
    two = ("--epochs", "1", "--cpu_replicas", "2")
    if os.environ.get("KERAS_BACKEND") != "jax":
        assert _finetune(model, tmp_path / "two", task["negatives"], task["beir"], *two) == 2
        assert "runs on one device on TensorFlow" in capsys.readouterr().err
        return
    found = []
    for name, extra in (("one", ("--epochs", "1")), ("two", two)):
        assert _finetune(model, tmp_path / name, task["negatives"], task["beir"], *extra) == 0
        found.append(json.loads((tmp_path / name / "results.json").read_text()))
    one, both = (document["scores"]["seeds"][0] for document in found)
    assert found[1]["protocol"]["cpu_replicas"] == 2
    assert both["epochs"][0]["train_loss"] == pytest.approx(
        one["epochs"][0]["train_loss"], rel=1e-4
    )
    assert both["dev"]["ndcg@10"] == pytest.approx(one["dev"]["ndcg@10"], abs=1e-4)
