"""The fine-tuning recipe by model size, `--learning_rate auto` and `--pooling mean`.

The size rule and the flags are checked without a model; `auto` and the mean-pooled head on
the tests' fresh tiny model (1 layer, hidden 32) and a few dozen examples: seconds."""

import dataclasses
import json
import os

import numpy as np
import pytest

from common import flags
from tests.trainer import finetune_data as fd
from tests.trainer import mlm_data
from trainer.finetuning import config, finetune, jobs, recipes

JAX = os.environ.get("KERAS_BACKEND") == "jax"


def _run_config(size, hidden, **keys):
    return mlm_data.saved_run(backbone_config={"hidden_dim": hidden}, size=size, **keys)


def test_the_size_is_the_recorded_name_when_the_width_agrees_else_the_width_decides():
    assert recipes.model_size(_run_config("tiny", 128)) == ("tiny", "run_config.json's model")
    assert recipes.model_size(_run_config("small", 256))[0] == "small"
    # --config changed the width of a "tiny" run: the width decides.
    assert recipes.model_size(_run_config("tiny", 768)) == ("base", "hidden_dim 768")
    assert recipes.model_size(_run_config(None, 1024))[0] == "large"
    assert recipes.model_size(_run_config(None, 32))[0] == "tiny"
    # After --init_from `model` is the flag's unused default: the width decides.
    continued = _run_config("from --init_from", 128, model="base")
    assert recipes.model_size(continued) == ("tiny", "hidden_dim 128")
    old = mlm_data.saved_run(backbone_config={"hidden_dim": 128}, model="tiny")  # no `size`
    assert recipes.model_size(old) == ("tiny", "run_config.json's model")


def test_tiny_and_small_get_their_own_rate_and_base_keeps_the_glue_recipe():
    tiny, base = recipes.own_defaults("tiny"), recipes.own_defaults("base")
    assert (tiny.learning_rate, tiny.epochs) == recipes.SIZE_RECIPES["tiny"]
    assert tiny.learning_rate >= 10 * base.learning_rate
    assert (base.learning_rate, base.epochs, base.batch_size) == (4e-5, 5, 16)
    assert recipes.own_defaults("large") == base
    assert recipes.pooling(None, "tiny") == "mean" and recipes.pooling(None, "base") == "cls"
    assert recipes.pooling("cls", "tiny") == "cls" and recipes.pooling("mean", "large") == "mean"
    mrpc = finetune.glue.TASKS["mrpc"].defaults
    assert recipes.glue_defaults(mrpc, "base") == mrpc
    small = recipes.glue_defaults(mrpc, "small")
    assert small.learning_rate == recipes.SIZE_RECIPES["small"][0]
    assert (small.epochs, small.batch_size, small.seeds) == (mrpc.epochs, 32, mrpc.seeds)


def test_the_help_reads_each_sizes_defaults_from_the_recipes():
    rate, epochs = recipes.SIZE_RECIPES["tiny"]
    assert recipes.by_size("learning_rate").startswith(f"tiny {rate:g}, small ")
    assert recipes.by_size("epochs").startswith(f"tiny {epochs}, small ")
    assert recipes.by_size("pooling") == "tiny mean, small mean"
    help_text = " ".join(f.metadata["help"] for f in flags.flag_fields(config.FinetuneFlags))
    for field in ("learning_rate", "epochs", "pooling"):
        assert recipes.by_size(field) in help_text, field


def _config(*extra):
    return finetune.FinetuneFlags(model="m", output_dir="o", train="t", dev="d", **dict(extra))


def _job(config, size):
    (job,) = jobs.build(config, (size, "run_config.json's model"))
    return job


def test_a_flag_the_user_gives_wins_over_the_size(monkeypatch):
    monkeypatch.setattr(jobs, "read_task", lambda config: ({}, ("a", "b"), {}, None))
    default = _job(_config(), "tiny")
    assert (default.recipe.learning_rate, default.recipe.epochs) == recipes.SIZE_RECIPES["tiny"]
    assert default.settings.pooling == "mean" and "size tiny" in default.settings.recipe_by_size
    given = _job(_config(("learning_rate", "4e-5"), ("epochs", 3), ("pooling", "cls")), "tiny")
    assert (given.recipe.learning_rate, given.recipe.epochs) == (4e-5, 3)
    assert given.settings.pooling == "cls"
    assert "by model size" in default.recipe_source
    assert "cramming" in _job(_config(), "base").recipe_source
    # auto: a marker around the size's rate, never a string; the job itself never changes.
    auto = _job(_config(("learning_rate", "auto")), "tiny")
    assert auto.recipe.learning_rate == recipes.Auto(recipes.SIZE_RECIPES["tiny"][0])
    assert auto.recipe.learning_rate.grid() == recipes.auto_grid(recipes.SIZE_RECIPES["tiny"][0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        auto.recipe = given.recipe


def test_auto_grid_and_bad_rates():
    assert recipes.auto_grid(1e-3) == [1e-4, 3e-4, 1e-3, 3e-3]
    assert recipes.auto_grid(4e-5) == [4e-6, 1.2e-5, 4e-5, 1.2e-4]
    assert _config(("learning_rate", "auto")).learning_rate == "auto"
    for bad in ("fast", "0", "-1e-3", "inf"):
        with pytest.raises(ValueError, match="positive number or auto"):
            _config(("learning_rate", bad))


def test_a_bad_rate_is_one_line(capsys):
    args = ["--model", "m", "--train", "t", "--dev", "d", "--output_dir", "o"]
    with pytest.raises(SystemExit) as stop:
        finetune.main([*args, "--learning_rate", "fast"])
    assert stop.value.code == 2
    assert "--learning_rate must be a positive number or auto" in capsys.readouterr().err


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return fd.export_preset(tmp_path_factory.mktemp("model"), "roberta")


def _files(tmp_path):
    """A regression task: its dev score (Spearman) differs from rate to rate even where a
    few steps leave a classifier at the constant answer."""
    return [
        *("--train", fd.write(tmp_path / "train.jsonl", fd.examples(32, 0, False, True))),
        *("--dev", fd.write(tmp_path / "dev.jsonl", fd.examples(16, 1, False, True))),
        *("--text_column", "sentence", "--task_type", "regression"),
        *("--batch_size", "8", "--epochs", "2"),
    ]


@pytest.mark.slow  # five fine-tunes: ~15 s of CPU
def test_auto_picks_the_best_rate_of_the_grid_and_records_the_sweep(model, tmp_path, capsys):
    export = tmp_path / "export" / "keras-hub"
    export.mkdir(parents=True)
    card = export / "README.md"
    card.write_text("---\nlicense: apache-2.0\n---\n# tiny\n")
    out = tmp_path / "out"
    args = [*_files(tmp_path), "--model", model, "--output_dir", str(out), "--seeds", "2"]
    assert finetune.main([*args, "--learning_rate", "auto", "--card", str(export)]) == 0
    found = json.loads((out / "results.json").read_text())
    sweep = found["learning_rate_sweep"]
    # The tests' model has hidden_dim 32: the tiny size, whose grid is around its rate.
    tiny_rate = recipes.SIZE_RECIPES["tiny"][0]
    assert [r["learning_rate"] for r in sweep["grid"]] == recipes.auto_grid(tiny_rate)
    dev = [r["dev"] for r in sweep["grid"]]
    assert len(set(dev)) > 1  # the rates differ on this task: the choice is a real one
    assert sweep["chosen"] == sweep["grid"][int(np.argmax(dev))]["learning_rate"]
    assert found["protocol"]["learning_rate"] == sweep["chosen"]
    assert sweep["seed"] == 2 and sweep["runs"] == 4 and sweep["seconds"] > 0
    assert [s["seed"] for s in found["scores"]["seeds"]] == [2]
    assert "tiny" in found["protocol"]["recipe_by_size"] and found["protocol"]["pooling"] == "mean"
    printed = capsys.readouterr().out
    assert printed.count("task lr ") == 4
    text = card.read_text()
    assert "learning_rate_sweep" in text and f"chosen: {sweep['chosen']}" in text


def test_a_diverged_grid_rate_is_written_on_the_card_as_diverged(tmp_path):
    """A rate of the grid that diverged has no dev score: the card says so, not round(None)."""
    from huggingface_hub import ModelCard

    from trainer.finetuning import card_scores

    card = tmp_path / "README.md"
    card.write_text("---\nlicense: apache-2.0\n---\n# tiny\n")
    grid = [
        {"learning_rate": 1e-4, "dev": 0.41234, "best_epoch": 1, "seconds": 1.0},
        {"learning_rate": 3e-3, "dev": None, "diverged": "loss nan at step 3"},
    ]
    document = {
        "task": {"type": "classification", "labels": ["a", "b"]},
        "scores": {"summary": {"dev": {"accuracy": {"mean": 0.5}}}, "seeds": [{"seed": 1}]},
        "data": {"dev": {"path": str(tmp_path / "dev.jsonl")}},
        "learning_rate_sweep": {
            **{"grid": grid, "metric": "accuracy", "seed": 1, "chosen": 1e-4},
            **{"runs": 2, "seconds": 2.0, "centre": 1e-3},
        },
    }
    card_scores.add([str(card)], card_scores.entries(document))
    (result,) = ModelCard.load(str(card)).data.eval_results
    grid = result.metric_args["learning_rate_sweep"]["grid"]
    assert grid == {"0.0001": 0.4123, "0.003": "diverged"}


def test_the_mean_pool_averages_the_kept_positions_only():
    from trainer.models.pooling import MeanPool

    sequence = np.arange(24, dtype="float32").reshape(2, 3, 4)
    mask = np.array([[1, 1, 0], [0, 0, 0]], bool)
    pooled = np.asarray(MeanPool()(sequence, mask))
    np.testing.assert_allclose(pooled[0], sequence[0, :2].mean(0))
    np.testing.assert_allclose(pooled[1], np.zeros(4))  # no token kept: zeros, not NaN


# XLA's compile of the step costs ~8 s of CPU on TensorFlow: BERT's case is the slow one.
@pytest.mark.parametrize("family", ["roberta", pytest.param("bert", marks=pytest.mark.slow)])
def test_mean_pooling_compiles_with_xla_trains_and_ignores_padding(tmp_path, family):
    """The head reads the non-padding tokens only: what the padding holds changes nothing."""
    import keras

    from trainer.finetuning.classifier import PretrainedBackbone, compile_for
    from trainer.models import model_source

    backbone = PretrainedBackbone(
        model_source.resolve(fd.export_preset(tmp_path, family)), pooling="mean"
    )
    classifier = backbone.classifier(num_outputs=3, seed=1)
    assert classifier.get_layer("mean_pool") and classifier.backbone is not None
    compile_for(classifier, "classification", 1e-2, 4, 0, 0.01, jit_compile=True)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 90, (8, 12)).astype("int32")
    mask = np.arange(12)[None, :] < rng.integers(3, 12, (8, 1))
    features = {"token_ids": np.where(mask, ids, 1), "padding_mask": mask}
    if family == "bert":
        features["segment_ids"] = np.zeros_like(ids)
    labels = rng.integers(0, 3, 8)
    history = classifier.fit(features, labels, batch_size=4, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    other = dict(features, token_ids=np.where(mask, ids, 7))  # other ids under the padding
    first = classifier.predict(features, verbose=0)
    np.testing.assert_allclose(classifier.predict(other, verbose=0), first, atol=1e-5)
    assert keras.backend.backend() in ("tensorflow", "jax")
