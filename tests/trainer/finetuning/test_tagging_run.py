"""`python -m trainer.finetune --task_type tagging` end to end on a tiny RoBERTa (byte-level BPE,
`make_training_dir`): entity F1 as seqeval counts it, tags unseen in training reported and
scored as gold, the best seed exported so that `pipeline("token-classification")` gives the
scores of results.json; a learnable task (capitalised words are entities) learnt, pretrained and
from scratch; bad input one line, exit 2, before any model loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.trainer import finetune_data as fd
from tests.trainer.models.test_checkpoints import make_training_dir
from trainer.finetuning import finetune
from trainer.tasks import entity_f1, word_alignment

JAX = os.environ.get("KERAS_BACKEND") == "jax"
LOWER = ["cat", "dog", "sat", "on", "the", "mat", "log", "sang", "in", "tree", "near", "house"]
UPPER = ["Paris", "Rome", "France", "Italy", "She", "Models", "The", "A"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_training_dir(str(tmp_path_factory.mktemp("tagging-run")), "roberta")[0]


def toy(count: int, seed: int, spans: bool = True) -> list[tuple[list, list]]:
    """Sentences whose capitalised words are entities: B-ENT, and with `spans` I-ENT when one
    follows (else each its own entity: a word's first piece tells its tag)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count):
        words = [
            str(rng.choice(UPPER if rng.random() < 0.3 else LOWER))
            for _ in range(int(rng.integers(3, 8)))
        ]
        tags, previous = [], "O"
        for word in words:
            tag = "O" if word.islower() else ("I-ENT" if spans and previous != "O" else "B-ENT")
            tags.append(tag)
            previous = tag
        rows.append((words, tags))
    return rows


def write(path, rows) -> str:
    """CoNLL columns (word, a POS-like column, the tag) or JSONL by the file's extension."""
    if str(path).endswith(".jsonl"):
        text = "".join(json.dumps({"tokens": w, "tags": t}) + "\n" for w, t in rows)
    else:
        text = "\n\n".join("\n".join(f"{w} X {t}" for w, t in zip(*row)) for row in rows)
    path.write_text(text, encoding="utf-8")
    return str(path)


def _main(run, tmp_path, files: dict, *extra) -> int:
    args = ["--model", run, "--task_type", "tagging", "--output_dir", str(tmp_path / "out")]
    for split, path in files.items():
        args += [f"--{split}", path]
    return finetune.main([*args, "--batch_size", "8", "--learning_rate", "3e-3", *extra])


def pipeline_tags(pipe, sentences: list) -> list:
    """Per word, the tag the transformers pipeline gives its first piece (O if cut)."""
    found = []
    for words in sentences:
        pieces = sorted(pipe(" ".join(words)), key=lambda piece: piece["index"])
        owners = word_alignment.token_words(words, [(p["start"], p["end"]) for p in pieces])
        tags = [None] * len(words)
        for piece, owner in zip(pieces, owners):
            tags[owner] = tags[owner] or piece["entity"]
        found.append([tag or "O" for tag in tags])
    return found


def test_the_command_scores_as_seqeval_reports_unseen_tags_and_exports_the_best_seed(
    run, tmp_path, capsys
):
    dev, test = toy(16, 1), toy(12, 2)
    dev[0][1][0] = "B-MISC"  # a tag training never uses: reported, scored as gold
    files = {
        "train": write(tmp_path / "train.conll", toy(48, 0)),
        "dev": write(tmp_path / "dev.jsonl", dev),
        "test": write(tmp_path / "test.conll", test),
    }
    assert _main(run, tmp_path, files, "--seeds", "1,2", "--epochs", "1") == 0
    out = capsys.readouterr().out
    assert "dev.jsonl: 1 word(s) in 1 sentence(s) carry tags the training split never uses" in out
    assert "dev entity F1 by type" in out and "entity_f1" in out
    found = json.loads((tmp_path / "out" / "results.json").read_text())
    assert found["task"]["labels"] == ["O", "B-ENT", "I-ENT"]
    assert found["task"]["scheme"] == "IOB2"
    assert found["task"]["unseen"]["dev"] == {"words": 1, "sentences": 1, "tags": {"B-MISC": 1}}
    assert found["data"]["train"]["sentences"] == 48 and found["data"]["dev"]["words_cut"] == 0
    scores = found["scores"]
    assert scores["metric"] == "entity_f1" and scores["constant_answer_dev"]["entity_f1"] == 0.0
    assert scores["summary"]["dev"]["entity_f1"]["n"] == 2
    best = max(scores["seeds"], key=lambda r: r["dev"]["entity_f1"])
    assert found["export"]["seed"] == best["seed"]
    assert found["export"]["architecture"] == "RobertaForTokenClassification"
    # The export's pipeline tags the words as the best seed did: seqeval on them gives its scores.
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    pipe = transformers.pipeline(
        "token-classification",
        model=found["export"]["path"],
        aggregation_strategy="none",
        ignore_labels=[],
    )
    for split, rows in (("dev", dev), ("test", test)):
        gold = [tags for _, tags in rows]
        predicted = pipeline_tags(pipe, [words for words, _ in rows])
        scores_now = entity_f1.entity_scores(gold, predicted, "IOB2")
        assert best[split]["entity_f1"] == pytest.approx(scores_now.f1, abs=1e-12)
        assert best[split]["entity_recall"] == pytest.approx(scores_now.recall, abs=1e-12)
        assert set(best[f"{split}_entities"]) == set(scores_now.per_type)
    assert "MISC" in best["dev_entities"]  # unseen: its support counted, never found


def test_packed_sentences_train_a_modernbert_whose_export_tags_as_scored(tmp_path):
    """ModernBERT reads several training sentences a row (`--packing auto`): fewer rows than
    sentences, and the export's pipeline gives the dev and test scores results.json holds."""
    model = make_training_dir(str(tmp_path), "modernbert")[0]
    dev, test = toy(12, 1), toy(8, 2)
    files = {
        "train": write(tmp_path / "train.conll", toy(48, 0)),
        "dev": write(tmp_path / "dev.conll", dev),
        "test": write(tmp_path / "test.conll", test),
    }
    assert _main(model, tmp_path, files, "--seeds", "1", "--epochs", "2") == 0
    found = json.loads((tmp_path / "out" / "results.json").read_text())
    assert found["protocol"]["rows"] == "packed"
    assert found["data"]["train"]["packed_rows"] < found["data"]["train"]["sentences"] // 2
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    pipe = transformers.pipeline(
        "token-classification", model=found["export"]["path"], aggregation_strategy="none",
        ignore_labels=[],
    )  # fmt: skip
    best = found["scores"]["seeds"][0]
    for split, rows in (("dev", dev), ("test", test)):
        predicted = pipeline_tags(pipe, [words for words, _ in rows])
        theirs = entity_f1.entity_scores([tags for _, tags in rows], predicted, "IOB2")
        assert best[split]["entity_f1"] == pytest.approx(theirs.f1, abs=1e-12), split


def lexical(count: int, seed: int) -> list[tuple[list, list]]:
    """Words w0..w94 of the WordLevel fixture (one piece each); w0..w19 are entities."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count):
        ids = rng.integers(0, 95, int(rng.integers(3, 9)))
        rows.append(([f"w{i}" for i in ids], ["B-ENT" if i < 20 else "O" for i in ids]))
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("scratch", [False, True], ids=["pretrained", "from-scratch"])
def test_a_learnable_task_is_learnt(tmp_path, scratch):
    """Whether a word is an entity is its own piece's identity: learnt in a few epochs. (On
    the BPE model, a capitalised word after a space often starts with a lone 'Ġ' piece, whose
    tag the model must read from the next piece: the tiny model stays near 0.9 F1 there.)"""
    model = fd.export_preset(tmp_path, "roberta")  # 1 layer, hidden 32, WordLevel
    files = {
        "train": write(tmp_path / "train.conll", lexical(96, 0)),
        "dev": write(tmp_path / "dev.conll", lexical(24, 1)),
    }
    extra = ["--from_scratch"] if scratch else []
    assert _main(model, tmp_path, files, "--seeds", "1", "--epochs", "6", *extra) == 0
    found = json.loads((tmp_path / "out" / "results.json").read_text())
    record = found["scores"]["seeds"][0]
    assert record["dev"]["entity_f1"] >= 0.9, record["epochs"]
    assert not record["collapsed"] and found["model"]["from_scratch"] is scratch


@pytest.mark.parametrize(
    ("case", "extra", "message"),
    [
        ("length", [], "dev.jsonl line 1: 2 tokens but 1 tags"),
        ("format", ["--input_format", "csv"], "--input_format csv"),
        ("auto", ["--learning_rate", "auto"], "--learning_rate auto"),
        ("all O", [], "every word is tagged O"),
    ],
)
def test_bad_input_is_one_line_exit_2(run, tmp_path, capsys, case, extra, message):
    train = [(["Paris", "is"], ["B-ENT" if case != "all O" else "O", "O"])]
    dev = [(["Rome", "is"], ["B-ENT"] if case == "length" else ["B-ENT", "O"])]
    files = {
        "train": write(tmp_path / "train.conll", train),
        "dev": write(tmp_path / "dev.jsonl", dev),
    }
    assert _main(run, tmp_path, files, *extra) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out" / "results.json").exists()


def _dataset_dict(folder, tag_column: str = "ner_tags") -> str:
    """A DatasetDict saved to disk as conll2003 is laid out: `tokens`, and the tags as a
    sequence of ClassLabel ids (a Hub name loads the same way, `hub.load`)."""
    import datasets

    names = ["O", "B-ENT", "I-ENT"]
    features = datasets.Features(
        {
            "tokens": datasets.Sequence(datasets.Value("string")),
            tag_column: datasets.Sequence(datasets.ClassLabel(names=names)),
        }
    )

    def split(rows):
        columns = {"tokens": [w for w, _ in rows], tag_column: [t for _, t in rows]}
        return datasets.Dataset.from_dict(columns, features=features)

    splits = {"train": split(toy(24, 0)), "validation": split(toy(8, 1))}
    datasets.DatasetDict(splits).save_to_disk(str(folder))
    return str(folder)


@pytest.mark.skipif(JAX, reason="data reading: the TensorFlow pass")
def test_a_dataset_dict_with_class_label_tags_fine_tunes(run, tmp_path, capsys):
    folder = _dataset_dict(tmp_path / "dataset")
    args = ["--model", run, "--task_type", "tagging", "--output_dir", str(tmp_path / "out"),
            "--hf_dataset", folder, "--seeds", "1", "--epochs", "1",
            "--batch_size", "8"]  # fmt: skip
    assert finetune.main(args) == 0
    assert "train = train (24), dev = validation (8)" in capsys.readouterr().out
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert document["task"]["labels"] == ["O", "B-ENT", "I-ENT"]
    assert document["data"]["train"]["examples"] == 24
    assert document["dataset"]["splits"] == {"train": "train", "dev": "validation"}


@pytest.mark.skipif(JAX, reason="data reading: the TensorFlow pass")
def test_a_dataset_without_a_tag_column_is_one_line(run, tmp_path, capsys):
    folder = _dataset_dict(tmp_path / "dataset", tag_column="labels")
    capsys.readouterr()  # the save's progress bars
    args = ["--model", run, "--task_type", "tagging", "--output_dir", str(tmp_path / "out")]
    assert finetune.main([*args, "--hf_dataset", folder]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no tags or ner_tags column (its columns: tokens, labels)" in err, err
    assert len(err.splitlines()) == 1
    assert finetune.main([*args, "--hf_dataset", folder, "--label_column", "labels",
                          "--seeds", "1", "--epochs", "1", "--batch_size", "8"]) == 0  # fmt: skip


def _replicas_run(model, folder, *extra) -> dict:
    """37 sentences in batches of 8 (the last, 5, does not split in two); TensorFlow's
    MirroredStrategy in a fresh process, as test_finetune_replicas runs it (collectives of an
    earlier strategy in the worker clash with a new one's)."""
    folder.mkdir()
    files = {
        "train": write(folder / "train.conll", lexical(37, 0)),
        "dev": write(folder / "dev.conll", lexical(13, 1)),
    }
    args = ["--model", model, "--task_type", "tagging", "--output_dir", str(folder / "out")]
    args += ["--train", files["train"], "--dev", files["dev"], "--batch_size", "8"]
    args += ["--learning_rate", "1e-2", "--seeds", "1", "--epochs", "3", "--strategy", "cpu"]
    if JAX or not extra:
        assert finetune.main([*args, *extra]) == 0
    else:
        command = [sys.executable, "-m", "trainer.finetune", *args, *extra]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((folder / "out" / "results.json").read_text())


@pytest.mark.slow
def test_two_replicas_fine_tune_as_one_device(tmp_path):
    """Each piece weighs 1 / its global batch's labelled pieces and the loss is their sum, so
    two replicas (whose gradients TensorFlow sums; JAX runs the batch as one program) take the
    step one device takes, the padding rows weighing nothing: JAX gives the same dev scores at
    every epoch; TensorFlow's replicas draw their own dropout masks (the head's 0.1), so there
    the first epoch's loss is compared."""
    import keras

    model = fd.export_preset(tmp_path, "bert")  # segment ids too
    one = _replicas_run(model, tmp_path / "one")
    try:
        two = _replicas_run(model, tmp_path / "two", "--cpu_replicas", "2")
    finally:
        if JAX:  # DataParallel is Keras' process-wide state: later tests must build without it
            keras.distribution.set_distribution(None)
    assert one["protocol"]["replicas"] == 1 and two["protocol"]["replicas"] == 2
    first, second = (run["scores"]["seeds"][0]["epochs"] for run in (one, two))
    assert second[0]["train_loss"] == pytest.approx(first[0]["train_loss"], rel=2e-2)
    if JAX:
        assert first[-1]["dev"]["entity_f1"] > 0.5  # it learnt: the comparison means something
        for mine, theirs in zip(second, first, strict=True):
            assert mine["dev"] == pytest.approx(theirs["dev"], abs=1e-6)
