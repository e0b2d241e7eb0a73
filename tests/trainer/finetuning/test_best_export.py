"""`python -m trainer.finetune` on a classification task writes its best seed as a transformers
folder, `{output_dir}/hf/` (trainer/finetuning/best_export.py): transformers' predictions on
the dev file give results.json's dev scores exactly; what cannot be exported is one line in
results.json, and a stale export goes with it; GLUE's classes keep the dataset's names.

The end-to-end run (2 seeds x 2 epochs of the tiny RoBERTa export, `--pooling cls`) costs
~11 s on TensorFlow and ~20 s on JAX (the step's compile) on a 2-core CPU: the JAX pass leaves
it to TensorFlow's (it passed on JAX when written) and checks the export's logits on JAX in
tests/trainer/release/test_classifier_export.py. The rest is under a second.
"""

from __future__ import annotations

import json
import os
import types

import numpy as np
import pytest

from common import tokenizer_files
from common.errors import UserError
from tests.trainer import finetune_data as fd
from trainer.finetuning import best_export, finetune
from trainer.models import model_source
from trainer.tasks import metrics

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TENSORFLOW_ONLY = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax", reason="~20 s on JAX; its logits are tested apart"
)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return fd.export_preset(tmp_path_factory.mktemp("best-export-models"), "roberta")


def hf_predictions(folder: str, rows: list[dict]) -> np.ndarray:
    """transformers' class ids of (sentence, second) `rows`, read as a user would."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    loaded = transformers.AutoModelForSequenceClassification.from_pretrained(
        folder, local_files_only=True
    )
    texts, pairs = [r["sentence"] for r in rows], [r["second"] for r in rows]
    encoded = tokenizer(texts, pairs, truncation=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        return loaded(**encoded).logits.numpy().argmax(-1)


def examples(count: int, seed: int) -> list[dict]:
    """`fd.examples`' pairs with the label's word three times: a task the tiny model's first
    token learns in 2 epochs, so that dev's predictions are not one class (seed 1 reaches
    0.92 on TensorFlow, 0.58 on JAX; seed 2 stays at the majority on both)."""
    rows = fd.examples(count, seed, True, False)
    for row in rows:
        row["sentence"] += (" w0" if row["label"] == "yes" else " w1") * 3
    return rows


@TENSORFLOW_ONLY
def test_the_best_seed_becomes_a_folder_whose_predictions_give_the_dev_scores(model, tmp_path):
    rows = {"train": examples(32, 0), "dev": examples(12, 1)}
    files = {split: fd.write(tmp_path / f"{split}.jsonl", found) for split, found in rows.items()}
    args = ["--model", model, "--train", files["train"], "--dev", files["dev"], "--pooling", "cls"]
    args += ["--text_column", "sentence", "--text_pair_column", "second", "--max_length", "16"]
    args += ["--output_dir", str(tmp_path / "out"), "--seeds", "1,2", "--epochs", "2"]
    assert finetune.main([*args, "--batch_size", "8", "--learning_rate", "1e-2"]) == 0
    found = json.loads((tmp_path / "out" / "results.json").read_text())
    export, seeds = found["export"], found["scores"]["seeds"]
    assert export["path"] == str(tmp_path / "out" / "hf")
    assert export["architecture"] == "RobertaForSequenceClassification"
    assert export["labels"] == ["no", "yes"]  # the training file's labels, sorted
    record = next(r for r in seeds if r["seed"] == export["seed"])
    assert record["dev"]["accuracy"] == max(r["dev"]["accuracy"] for r in seeds)
    config = transformers.AutoConfig.from_pretrained(export["path"], local_files_only=True)
    assert config.id2label == {0: "no", 1: "yes"}
    assert config.problem_type == "single_label_classification"
    targets = np.array([config.label2id[r["label"]] for r in rows["dev"]])
    predicted = hf_predictions(export["path"], rows["dev"])
    assert len(set(predicted.tolist())) == 2  # not a constant answer: the check means more
    assert metrics.classification_scores(targets, predicted, 2) == record["dev"]


def _job(folder, pooling: str, names=("no", "yes"), glue: str | None = None):
    """What `BestSeed` reads of a `jobs.Job`."""
    return types.SimpleNamespace(
        output_dir=str(folder),
        task_type="classification",
        settings=types.SimpleNamespace(pooling=pooling),
        recipe=types.SimpleNamespace(metric="accuracy"),
        names=names,
        extra={"glue": glue} if glue else {},
    )


def test_a_head_transformers_cannot_read_is_one_line_and_no_stale_export(model, tmp_path):
    """RoBERTa's head on the mean of the tokens (the tiny size's default): no folder, the
    reason in results.json, and an earlier run's export removed, not left to be mistaken
    for this run's model."""
    source = model_source.resolve(model)
    info = tokenizer_files.load(source.tokenizer_dir)[1]
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    export = best_export.BestSeed(source, info, _job(tmp_path, "mean"), 16)
    assert export.notes() == [f"note: {export.skipped}"]
    export.offer({"seed": 1, "dev": {"accuracy": 0.9}}, model=None)  # nothing kept
    document = {}
    export.finish(types.SimpleNamespace(chief=True), None, document)
    assert document["export"]["path"] is None
    assert "reads the first token only" in document["export"]["skipped"]
    assert not (tmp_path / "hf").exists()


def test_an_hf_folder_of_other_files_is_refused_before_any_work(tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="holds files but no config.json"):
        best_export.check_folder(_job(tmp_path, "cls"))
    (tmp_path / "hf" / "config.json").write_text("{}")  # an earlier export: replaced later
    best_export.check_folder(_job(tmp_path, "cls"))


@pytest.mark.parametrize(
    ("task", "names", "expected"),
    [
        ("sst2", ("0", "1"), ("negative", "positive")),
        ("cola", ("0", "1"), ("unacceptable", "acceptable")),
        ("mnli", ("contradiction", "entailment", "neutral"), None),  # already names
        ("rte", ("entailment", "not_entailment"), None),
        ("stsb", None, None),  # a regression: no classes
        (None, ("-1", "+1"), None),  # a file's labels stay as the file gives them
    ],
)
def test_glue_classes_are_named_as_the_dataset_names_them(task, names, expected):
    job = _job("unused", "cls", names, task)
    assert best_export.label_names(job) == (expected or names)


def test_the_problem_type_is_transformers_name_for_the_kinds_loss():
    job = _job("unused", "cls")
    assert best_export.problem_type(job) == "single_label_classification"
    job.task_type = "regression"
    assert best_export.problem_type(job) == "regression"  # the pipeline applies no function
