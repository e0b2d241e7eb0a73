"""`python -m trainer.finetune` end to end on tiny models and data: each task kind
(pair classification, single regression, single classification; the pair-regression
combination adds nothing the packing and metric tests do not check), each model layout (our
export, a run folder), from scratch, results.json's promises. One fine-tune costs ~4 s on
TensorFlow and ~10 s on JAX (the step's compile): the JAX pass runs the two cases that cover
both families."""

import json
import os

import pytest

from tests.trainer import finetune_data as fd
from trainer.finetuning import finetune

TENSORFLOW_ONLY = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax", reason="the JAX pass runs the two cases above"
)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {
        "export": fd.export_preset(root, "roberta"),
        "run": fd.run_folder(root, "bert", masked_accuracy=0.012),
    }


def _finetune(tmp_path, model, name, pair, regression, *extra):
    tmp_path.mkdir(exist_ok=True)
    files = {}
    for split, seed, count in (("train", 0, 32), ("dev", 1, 12)):
        files[split] = fd.write(
            tmp_path / f"{split}{name}", fd.examples(count, seed, pair, regression)
        )
    args = [
        "--model",
        model,
        "--train",
        files["train"],
        "--dev",
        files["dev"],
        "--text_column",
        "sentence",
        "--output_dir",
        str(tmp_path / "out"),
        "--learning_rate",
        "1e-3",
        "--batch_size",
        "8",
        *extra,
    ]
    if pair:
        args += ["--text_pair_column", "second"]
    if regression:
        args += ["--task_type", "regression"]
    assert finetune.main(args) == 0
    return json.loads((tmp_path / "out" / "results.json").read_text())


def test_pair_classification_from_our_export_selects_on_dev_and_states_the_protocol(
    models, tmp_path, capsys
):
    found = _finetune(
        tmp_path,
        models["export"],
        ".tsv",
        True,
        False,
        "--seeds",
        "1,2",
        "--epochs",
        "2",
        "--max_length",
        "10",
        "--test",
        fd.write(tmp_path / "test.tsv", fd.examples(8, 2, True, False)),
    )
    protocol, scores = found["protocol"], found["scores"]
    assert protocol["seeds"] == [1, 2] and protocol["metric"] == "accuracy"
    assert "cramming" in protocol["recipe_source"] and protocol["selection"]
    assert found["model"]["family"] == "roberta" and found["task"]["labels"] == ["no", "yes"]
    assert found["data"]["train"]["truncated"] > 0  # 10 tokens cannot hold every pair
    for record in scores["seeds"]:
        best = max(e["dev"]["accuracy"] for e in record["epochs"])
        assert record["dev"]["accuracy"] == best and len(record["epochs"]) == 2
        assert set(record["test"]) == {"accuracy", "f1", "macro_f1", "mcc"}
        assert isinstance(record["collapsed"], bool)
    summary = scores["summary"]
    assert summary["dev"]["accuracy"]["n"] == 2 and "median" in summary["test"]["f1"]
    assert summary["collapsed_seeds"] == [r["seed"] for r in scores["seeds"] if r["collapsed"]]
    out = capsys.readouterr().out
    assert "mean" in out and "median" in out and "test f1" in out
    assert sorted(os.listdir(tmp_path / "out" / "logs")) == ["seed-1", "seed-2"]


@pytest.mark.slow
def test_single_regression_from_a_run_folder_warns_of_the_plateau(models, tmp_path, capsys):
    found = _finetune(tmp_path, models["run"], ".csv", False, True, "--seeds", "3", "--epochs", "1")
    assert found["model"]["kind"] == "checkpoint" and found["model"]["family"] == "bert"
    assert found["scores"]["metric"] == "spearman"
    assert set(found["scores"]["seeds"][0]["dev"]) == {"pearson", "spearman", "mse"}
    pretraining = found["pretraining"]
    assert pretraining["masked_accuracy"] == 0.012 and pretraining["step"] == 10
    assert pretraining["unigram_baseline"] > 0.008  # the repetitive corpus: ~1 %
    assert "near the unigram baseline" in pretraining["warning"]
    assert "warning: masked accuracy 1.2 %" in capsys.readouterr().out


@pytest.mark.slow
@TENSORFLOW_ONLY
def test_single_classification_from_jsonl_from_scratch_scores_a_seed_as_if_alone(models, tmp_path):
    """Seeds share one compiled model (`protocol.SeedModels`): seed 2 after seed 1 must
    train exactly as seed 2 alone."""
    both = _finetune(
        tmp_path / "both",
        models["export"],
        ".jsonl",
        False,
        False,
        "--seeds",
        "1,2",
        "--epochs",
        "1",
        "--from_scratch",
    )
    alone = _finetune(
        tmp_path / "alone",
        models["export"],
        ".jsonl",
        False,
        False,
        "--seeds",
        "2",
        "--epochs",
        "1",
        "--from_scratch",
    )
    assert both["model"]["from_scratch"] is True
    after, first = both["scores"]["seeds"][1]["epochs"], alone["scores"]["seeds"][0]["epochs"]
    assert [e["train_loss"] for e in after] == pytest.approx(
        [e["train_loss"] for e in first], rel=1e-5
    )
    assert [e["dev"] for e in after] == [e["dev"] for e in first]


def test_pretrained_and_from_scratch_start_from_different_backbone_weights(models):
    import numpy as np

    from trainer.finetuning.classifier import PretrainedBackbone
    from trainer.models import model_source

    source = model_source.resolve(models["export"])
    pretrained = PretrainedBackbone(source).classifier(2, seed=1).backbone.get_weights()
    scratch = PretrainedBackbone(source, from_scratch=True).classifier(2, seed=1)
    saved = PretrainedBackbone(source).weights
    assert all(np.array_equal(a, b) for a, b in zip(pretrained, saved))
    assert not all(np.array_equal(a, b) for a, b in zip(scratch.backbone.get_weights(), saved))


@pytest.mark.slow
def test_a_run_killed_while_training_leaves_no_results_file_not_even_an_old_one(
    models, tmp_path, monkeypatch, capsys
):
    from common.errors import Terminated
    from trainer.finetuning import protocol

    def killed(*args, **kwargs):
        raise Terminated("stopped by signal SIGTERM")

    stale = tmp_path / "out" / "results.json"
    stale.parent.mkdir()
    stale.write_text('{"scores": "of an earlier run"}')
    monkeypatch.setattr(protocol, "run_seed", killed)
    train = fd.write(tmp_path / "train.csv", fd.examples(8, 0, False, False))
    code = finetune.main(
        [
            "--model",
            models["export"],
            "--train",
            train,
            "--dev",
            train,
            "--text_column",
            "sentence",
            "--output_dir",
            str(stale.parent),
        ]
    )
    assert code == 143 and "SIGTERM" in capsys.readouterr().err
    assert not stale.exists()


def test_an_export_without_its_run_reads_masked_accuracy_from_its_model_card(models, tmp_path):
    import shutil

    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    from trainer.finetuning import masked_accuracy
    from trainer.models import model_source

    export = tmp_path / "moved-export"
    shutil.copytree(models["export"], export)
    facts = masked_accuracy.pretraining_facts(model_source.resolve(str(export)))
    assert facts["masked_accuracy"] is None
    common = dict(task_type="fill-mask", dataset_type="custom", dataset_name="held-out")
    results = [
        EvalResult(metric_type="accuracy", metric_value=0.05, **common),
        EvalResult(metric_type="unigram_baseline_ratio", metric_value=1.25, **common),
    ]
    data = ModelCardData(model_name="m", eval_results=results)
    (export / "README.md").write_text(str(ModelCard(f"---\n{data.to_yaml()}\n---\n\ntext")))
    facts = masked_accuracy.pretraining_facts(model_source.resolve(str(export)))
    assert facts["masked_accuracy"] == 0.05
    assert facts["unigram_baseline"] == pytest.approx(0.04)
    assert "near the unigram baseline" in facts["warning"]
