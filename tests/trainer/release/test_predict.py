"""Mask filling from training runs and presets: right answers, batching, one-line errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.trainer.models.test_checkpoints import MAX_LENGTH, make_training_dir
from trainer.release import export, predict

REPO_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
TEXTS = {
    "roberta": ["The cat <mask> on the mat.", "<mask> dog sat on the <mask>.", "A <mask>"],
    "bert": ["the cat [MASK] on the mat.", "[MASK] dog sat on the [MASK].", "a [MASK]"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("predict"))
    return {family: make_training_dir(root, family) for family in ("roberta", "bert")}


def expected_top(masked_lm, predictor, text, top_k):
    """Independent reference: one unpadded row, the full softmax, sorted ids."""
    ids = predictor.tokenizer.encode(text).ids
    positions = [p for p, t in enumerate(ids) if t == predictor.info.mask_id]
    inputs = {
        "token_ids": np.array([ids], np.int32),
        "padding_mask": np.ones((1, len(ids)), np.int32),
        "mask_positions": np.array([positions], np.int32),
    }
    if "segment_ids" in masked_lm.input:
        inputs["segment_ids"] = np.zeros((1, len(ids)), np.int32)
    logits = np.asarray(masked_lm(inputs, training=False), np.float64)[0]
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    return [
        [(int(t), probs[m, t]) for t in np.argsort(-probs[m])[:top_k]]
        for m in range(len(positions))
    ]


@pytest.mark.parametrize("family", ["roberta", "bert"])
def test_predict_matches_the_model_and_batching_changes_nothing(runs, family):
    run_dir, masked_lm = runs[family]
    predictor = predict.MaskPredictor(run_dir)
    results = predictor.predict(TEXTS[family], top_k=4)  # one batch, mixed lengths and masks
    assert [len(masks) for masks in results] == [1, 2, 1]
    for text, masks in zip(TEXTS[family], results):
        expected = expected_top(masked_lm, predictor, text, 4)
        for candidates, reference in zip(masks, expected):
            assert [tok for tok, _ in candidates] == [
                predictor.tokenizer.decode([i], skip_special_tokens=False) for i, _ in reference
            ]
            np.testing.assert_allclose(
                [s for _, s in candidates], [s for _, s in reference], rtol=1e-5
            )


@pytest.fixture(scope="module")
def preset(runs, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("preset") / "export")
    return export.export(runs["roberta"][0], out, "keras-hub")["keras-hub"]


def test_predict_masks_from_preset_equals_checkpoint(runs, preset):
    run_dir, _ = runs["roberta"]
    from_run = predict.predict_masks(run_dir, TEXTS["roberta"][:1], top_k=3)
    from_preset = predict.predict_masks(preset, TEXTS["roberta"][:1], top_k=3)
    assert len(from_run[0][0]) == 3
    assert [t for t, _ in from_run[0][0]] == [t for t, _ in from_preset[0][0]]
    np.testing.assert_allclose(
        [s for _, s in from_run[0][0]], [s for _, s in from_preset[0][0]], rtol=1e-6
    )


@pytest.mark.parametrize(
    "named", ["keras_hub>NoSuchMaskedLM", "keras_hub>RobertaTextClassifier", None]
)
def test_a_preset_whose_task_json_names_no_masked_lm_is_one_line(preset, tmp_path, capsys, named):
    """keras-hub would end in its TypeError for a class it has not registered, and build a
    MaskedLM with a random head for another task: refused as config.json's class is."""
    import json

    copy = tmp_path / "preset"
    shutil.copytree(preset, copy)
    task = json.loads((copy / "task.json").read_text())
    (copy / "task.json").write_text(json.dumps({**task, "registered_name": named}))
    assert predict.main(["--model", str(copy), "A <mask>"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"its task.json names {named!r}" in err[0], err


def test_padding_rows_of_the_embedding_are_never_ranked(tmp_path):
    """ModernBERT pads its embedding to a multiple of 64: rows no tokenizer id reaches get no
    probability, so the tokenizer's own ids alone are listed and their probabilities sum to 1."""
    run_dir, masked_lm = make_training_dir(str(tmp_path), "modernbert")
    predictor = predict.MaskPredictor(run_dir)
    vocab = predictor.info.vocab_size
    assert masked_lm.backbone.token_embedding.input_dim > vocab  # there are spare rows
    (candidates,) = predictor.predict(["the cat [MASK] on the mat."], top_k=vocab + 50)[0]
    assert len(candidates) == vocab and all(token is not None for token, _ in candidates)
    assert sum(p for _, p in candidates) == pytest.approx(1.0, abs=1e-9)
    ids = predictor.tokenizer.encode("the cat [MASK] on the mat.").ids
    inputs, _ = predictor.model_inputs([ids])
    logits = np.asarray(masked_lm(inputs, training=False), np.float64)[0, 0, :vocab]
    reference = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    top = np.argsort(-reference)[:5]  # the softmax over the tokenizer's ids alone
    assert [t for t, _ in candidates[:5]] == [predictor._token_text(int(i)) for i in top]
    np.testing.assert_allclose([p for _, p in candidates[:5]], reference[top], rtol=1e-5)


def test_input_errors(runs):
    predictor = predict.MaskPredictor(runs["roberta"][0])
    assert predictor.mask_token == "<mask>"
    with pytest.raises(predict.InputError, match="text 2 has no <mask> token"):
        predictor.predict(["a <mask>", "BERT style [MASK] is not this tokenizer's"])
    with pytest.raises(predict.InputError, match=f"at most {MAX_LENGTH}"):
        predictor.predict(["<mask> " + "word " * MAX_LENGTH])
    assert predictor._masked_lm is None  # refused before loading the model


def test_cli(runs, capsys):
    assert predict.main(["--model", runs["bert"][0], "the [MASK] sat.", "--top_k", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["[1] the [MASK] sat.", "  mask 1:"] and len(out) == 4


@pytest.mark.slow
def test_cli_error_is_one_line_with_exit_code_2(runs):
    """A real process: no traceback and no TensorFlow noise (the model is never loaded)."""
    result = subprocess.run(
        [sys.executable, "-m", "trainer.predict", "--model", runs["roberta"][0], "no mask here"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: text 1 has no <mask> token: 'no mask here'"
    ]


@pytest.mark.slow
def test_cli_on_a_cpu_shows_no_tensorflow_noise(runs):
    """The model's first call makes oneDNN log an `E0000 ... DT_INT64` line once per process;
    on a machine without a GPU it is hidden with TensorFlow's other known start-up lines."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_VISIBLE_DEVICES", "TF_CPP_MIN_LOG_LEVEL")
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.predict",
            "--model",
            runs["roberta"][0],
            "The cat <mask> on the mat.",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mask 1:" in result.stdout
    for noise in ("E0000", "DT_INT64", "cuInit", "cuda drivers", "cpu_feature_guard"):
        assert noise not in result.stdout + result.stderr, (noise, result.stderr[-3000:])
