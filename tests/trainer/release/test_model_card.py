"""Model cards from a real tiny run (Beam prepare of real prose -> 20 steps -> export): every
field present, parsed back with huggingface_hub, and equal to what the run's files say."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from huggingface_hub import ModelCard

from common import manifest
from tests.trainer.mlm_data import CARD_RUN_STEPS, saved_run
from trainer.release import baseline, card_facts, export, model_card
from trainer.run_folder.run_record import RunRecord

OPTIONS = model_card.CardOptions(language="en", license="apache-2.0")


@pytest.fixture(scope="module")
def exported(prepared_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("card_export")
    paths = export.export(str(prepared_run["run"]), str(out), "all", OPTIONS)
    cards = {
        fmt: ModelCard.load(os.path.join(folder, model_card.README))
        for fmt, folder in paths.items()
    }
    return {**prepared_run, "paths": paths, "cards": cards}


def _read(path):
    return json.loads(path.read_text())


def test_every_export_has_a_card_that_parses(exported):
    for fmt, card in exported["cards"].items():
        data = card.data
        assert data.library_name == {"keras-hub": "keras-hub", "hf": "transformers"}[fmt]
        assert data.pipeline_tag == "fill-mask"
        assert data.language == "en" and data.license == "apache-2.0"
        assert {"masked-lm", "roberta", "masking-token"} <= set(data.tags)
        kinds = [r.metric_type for r in data.eval_results]
        assert kinds == ["loss", "accuracy", "perplexity", "unigram_baseline_ratio"]
        assert {r.task_type for r in data.eval_results} == {"fill-mask"}
        for section in (
            "## Model",
            "## Tokenizer",
            "## Training data",
            "## Training recipe",
            "## Results",
            "## How to use",
        ):
            assert section in card.text, (fmt, section)


def test_results_are_the_runs(exported):
    run = exported["run"]
    metrics = _read(run / "metrics.json")
    top, share = baseline.unigram_baseline(str(run))  # what `trainer.baseline` prints
    results = {r.metric_type: r.metric_value for r in exported["cards"]["hf"].data.eval_results}
    assert metrics["steps"] == CARD_RUN_STEPS
    assert results["loss"] == round(metrics["eval_loss"], 4)
    assert results["accuracy"] == round(metrics["eval_accuracy"], 4)
    assert results["perplexity"] == round(metrics["eval_perplexity"], 4)
    assert results["unigram_baseline_ratio"] == round(metrics["eval_accuracy"] / share, 4)
    text = exported["cards"]["hf"].text
    assert f"Evaluation at step {CARD_RUN_STEPS} " in text
    assert f"| masked accuracy | {100 * metrics['eval_accuracy']:.2f} % |" in text
    assert f"{100 * share:.2f} % masked accuracy" in text


def test_data_section_is_the_prepare_manifest(exported):
    found = manifest.read_manifest(str(exported["data"] / "train"))
    run_counts = found.accounting["run"]
    config = _read(exported["run"] / "run_config.json")
    text = exported["cards"]["keras-hub"].text
    assert run_counts["documents_read"] > 100  # the real corpus, really prepared
    assert f"| documents read by the prepare run | {run_counts['documents_read']:,} |" in text
    duplicates = sum(run_counts["duplicates_by_kind"].values())
    assert f"| duplicates removed | {duplicates:,}" in text
    filtered = sum(run_counts["filtered_by_rule"].values())
    assert f"| removed by the quality filter | {filtered:,}" in text
    assert f"| training sequences | {found.num_examples:,} of {found.max_length} tokens |" in text
    assert f"| training tokens (not padding) | {found.num_tokens:,} |" in text
    assert f"`{config['train_data_digest']}`" in text


def test_model_tokenizer_and_recipe_are_the_runs(exported):
    config = _read(exported["run"] / "run_config.json")
    text = exported["cards"]["hf"].text
    assert f"({config['size']}, " in text  # the count: test_each_card_counts_its_own_files
    backbone = config["backbone_config"]
    assert f"| layers | {backbone['num_layers']} |" in text
    assert f"| hidden size | {backbone['hidden_dim']} |" in text
    tokenizer = _read(exported["run"] / "tokenizer" / "tokenizer.json")
    assert f"| kind | {tokenizer['model']['type']} (" in text
    assert f"| vocabulary | {config['tokenizer']['vocab_size']:,} |" in text
    assert f"| optimizer steps | {CARD_RUN_STEPS} (of {config['total_steps']} planned) |" in text
    assert (
        f"| global batch | {config['global_batch_size']} sequences (16 per replica x 1) |" in text
    )
    assert f"| peak learning rate | {config['learning_rate']} |" in text
    assert f"linear warmup over {config['warmup_steps']} steps" in text
    assert "| masking | single tokens (BERT/RoBERTa), 0.15 of tokens |" in text
    assert "| precision | fp32 |" in text and "| hardware | CPU, 1 replica(s) |" in text
    assert f"| Keras backend | {config.get('backend') or 'not recorded'} |" in text


def test_each_card_counts_the_parameters_its_own_folder_holds(exported):
    """The transformers card counts model.safetensors (RoBERTa: two more position rows and a
    token-type row than the Keras model), the keras-hub card the preset's model."""
    import keras_hub
    from safetensors.numpy import load_file

    tensors = load_file(os.path.join(exported["paths"]["hf"], export.HF_WEIGHTS))
    in_file = sum(t.size for t in tensors.values())
    preset = keras_hub.models.MaskedLM.from_preset(exported["paths"]["keras-hub"])
    assert in_file != preset.count_params()
    size = _read(exported["run"] / "run_config.json")["size"]
    assert f"({size}, {in_file:,} parameters)" in exported["cards"]["hf"].text
    assert f"({size}, {preset.count_params():,} parameters)" in exported["cards"]["keras-hub"].text


def test_usage_names_the_published_repositories(prepared_run, tmp_path):
    options = model_card.CardOptions(
        published={"hf": "hf://org/tiny", "keras-hub": "hf://org/tiny-keras-hub"}
    )
    paths = export.export(str(prepared_run["run"]), str(tmp_path), "all", options)
    text = ModelCard.load(os.path.join(paths["hf"], "README.md")).text
    assert 'pipeline("fill-mask", model="org/tiny")' in text
    assert 'MaskedLM.from_preset("hf://org/tiny-keras-hub")' in text
    assert "The cat <mask> on the mat." in text  # the tokenizer's own mask token


def test_an_earlier_checkpoint_gets_its_own_evaluation(prepared_run, tmp_path):
    run = prepared_run["run"]
    history = _read(run / "history.json")
    at_10 = next(e for e in history if e["step"] == 10)
    results = card_facts.results_at(str(run), 10)
    assert results["eval_loss"] == at_10["eval_loss"] != _read(run / "metrics.json")["eval_loss"]
    paths = export.export(
        str(run / "checkpoints" / "ckpt-00000010.weights.h5"), str(tmp_path), "hf"
    )
    card = ModelCard.load(os.path.join(paths["hf"], "README.md"))
    loss = next(r for r in card.data.eval_results if r.metric_type == "loss")
    assert loss.metric_value == round(at_10["eval_loss"], 4)


def test_a_preset_exported_again_keeps_its_facts(exported, tmp_path):
    again = export.export(exported["paths"]["keras-hub"], str(tmp_path), "hf")
    card = ModelCard.load(os.path.join(again["hf"], "README.md"))
    assert card.data.eval_results == exported["cards"]["hf"].data.eval_results


def test_what_is_gone_is_not_recorded(prepared_run, tmp_path):
    """A run whose data was moved away: the card says so instead of guessing."""
    run = tmp_path / "run"
    shutil.copytree(prepared_run["run"], run)
    config = _read(run / "run_config.json")
    config["train_data"] = config["eval_data"] = str(tmp_path / "moved")
    (run / "run_config.json").write_text(json.dumps(config))
    paths = export.export(str(run), str(tmp_path / "out"), "hf")
    card = ModelCard.load(os.path.join(paths["hf"], "README.md"))
    assert "The prepare manifest was not recorded." in card.text
    assert "unigram baseline not computed" in card.text
    kinds = [r.metric_type for r in card.data.eval_results]
    assert kinds == ["loss", "accuracy", "perplexity"]  # no ratio without a baseline


def test_an_accumulated_run_says_how_its_global_batch_is_made():
    from trainer.release import card_facts, card_text

    config = {
        "global_batch_size": 64,
        "per_replica_batch_size": 4,
        "replicas": 2,
        "grad_accum_steps": 8,
        "total_steps": 10,
    }
    facts = card_facts.CardFacts(saved_run(**config), 1, {}, 10, None, None, None, None)
    assert (
        "| global batch | 64 sequences (4 per replica x 2 x 8 accumulated micro-batches) |"
        in card_text.recipe_section(facts)
    )


def test_a_restarted_run_states_each_attempts_recipe_with_its_steps():
    """Restarted at step 400 with another peak rate and 2 replicas x 8 instead of 1 x 16
    (allowed changes): the card gives each attempt its steps, never the last one's recipe as
    the whole run's. An attempt whose steps were all redone (resumed at 400 again) is gone."""
    from trainer.release import card_facts, card_text
    from trainer.run_folder import attempts

    first = {
        "learning_rate": 1e-3,
        "global_batch_size": 16,
        "per_replica_batch_size": 16,
        "replicas": 1,
        "grad_accum_steps": 1,
        "strategy": "cpu",
        "precision": "fp32",
        "total_steps": 1000,
        "warmup_steps": 50,
    }
    second = {
        **first,
        "learning_rate": 5e-4,
        "per_replica_batch_size": 8,
        "replicas": 2,
        "strategy": "gpu",
    }
    history = attempts.history(None, first, 0)
    history = attempts.history({**first, "attempts": history}, second, 400)
    history = attempts.history({**second, "attempts": history}, second, 400)  # a kill at 450
    assert [a["start_step"] for a in history] == [0, 400]
    config = saved_run(**second, attempts=history)
    facts = card_facts.CardFacts(
        config, 1, {}, 600, None, None, None, None, attempts=tuple(attempts.spans(history, 600))
    )
    text = card_text.recipe_section(facts)
    assert "| peak learning rate | by attempt, see below |" in text
    assert "| global batch | by attempt, see below |" in text
    assert "| steps | peak learning rate | global batch | hardware |" in text
    assert "| 0-400 | 0.001 | 16 sequences (16 per replica x 1) | CPU, 1 replica(s) |" in text
    assert "| 400-600 | 0.0005 | 16 sequences (8 per replica x 2) | GPU, 2 replica(s) |" in text
    assert "| precision | fp32 |" in text  # what held throughout stays one row
    one = card_facts.CardFacts(
        config, 1, {}, 300, None, None, None, None, attempts=tuple(attempts.spans(history, 300))
    )
    assert "Attempts" not in card_text.recipe_section(one)  # step 300: the first recipe only


def test_finetune_scores_join_a_real_exports_cards_and_keep_what_they_said(exported, tmp_path):
    from trainer.finetuning import card_scores
    from trainer.tasks import glue

    root = tmp_path / "export"
    shutil.copytree(os.path.dirname(exported["paths"]["hf"]), root)
    reported = {name: {m: 0.5 for m in glue.TASKS[name].reported} for name in glue.ORDER}
    document = {
        "glue": glue.glue_score(reported),
        "tasks": {name: {"reported": values, "seeds": [1]} for name, values in reported.items()},
    }
    card_scores.add(card_scores.readmes(str(root)), card_scores.entries(document))
    for fmt, before in exported["cards"].items():
        after = ModelCard.load(str(root / fmt / model_card.README))
        assert after.text == before.text and after.data.tags == before.data.tags
        old = len(before.data.eval_results)
        assert after.data.eval_results[:old] == before.data.eval_results
        assert {r.dataset_type for r in after.data.eval_results[old:]} == {"nyu-mll/glue"}


@pytest.mark.parametrize(
    "source, name",
    [
        ("FacebookAI/roberta-base", "roberta-from-roberta-base-mlm"),
        ("kaggle://keras/roberta/keras/roberta_base_en/2", "roberta-from-roberta-base-en-mlm"),
        ("runs/base/checkpoints/ckpt-00001000.weights.h5", "roberta-from-base-mlm"),
        ("/data/exports/tiny/hf/", "roberta-from-tiny-mlm"),
    ],
)
def test_a_run_continued_from_a_model_is_named_after_that_model_not_a_flag(source, name):
    """task.py records an --init_from run's size as "from --init_from": no flag's text in the
    export's name (it was `roberta-from --init_from-mlm`) nor in the card's size."""
    from trainer.release import card_text

    config = {
        "family": "roberta",
        "size": "from --init_from",
        "init_from": {"path": source, "kind": "hf", "digest": "ab" * 32},
        "backbone_config": {},
        "tokenizer": {"vocab_size": 100},
    }
    facts = card_facts.CardFacts(RunRecord.from_dict(config), 1, {}, 10, None, None, None, None)
    assert model_card.model_name(facts) == name
    assert "--init_from" not in card_text.model_section(facts)


def test_the_data_table_states_the_quality_classifier():
    """prepare --quality_model's manifest record becomes one row of the card's data table."""
    from trainer.release import card_prepare_steps

    record = {
        "kind": "fasttext", "sha256": "ab" * 32, "score": "probability of __label__hq (softmax)",
        "threshold_used": 0.8125, "keep_fraction": 0.1, "action": "remove",
        "documents_kept": 1_000, "documents_scored": 10_000, "documents_below": 9_000,
    }  # fmt: skip
    assert card_prepare_steps.quality_model(record) == (
        "fasttext classifier (sha256 abababababab), probability of __label__hq (softmax): 1,000 "
        "of 10,000 documents kept at score >= 0.8125 (the top 0.1); 9,000 below it removed"
    )
    assert card_prepare_steps.quality_model({}) == "none"
