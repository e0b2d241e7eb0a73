"""The whole chain on a small real corpus: tokenizer -> Beam prepare -> train -> export ->
transformers + predict. Each half is tested in depth elsewhere; this checks they fit."""

import json

import numpy as np
import pytest

from beam_pipelines import prepare
from trainer.pretraining import task
from trainer.release import export, predict

pytestmark = pytest.mark.slow  # the fast lane (make test-fast) leaves it to make test


def test_text_to_a_model_transformers_can_load(tmp_path, corpus_jsonl, bpe_tokenizer_dir):
    data = tmp_path / "prepared"
    assert (
        prepare.run(
            [
                "--runner=FnApiRunner",
                "--input",
                str(corpus_jsonl),
                "--tokenizer",
                bpe_tokenizer_dir,
                "--output_dir",
                str(data),
                "--max_length",
                "32",
                "--validation_fraction",
                "0.1",
            ]
        )
        == 0
    )
    run = tmp_path / "run"
    overrides = json.dumps(
        {"num_layers": 1, "hidden_dim": 32, "num_heads": 2, "intermediate_dim": 64}
    )
    assert (
        task.main(
            [
                "--train_data",
                str(data / "train"),
                "--eval_data",
                str(data / "validation"),  # the tokenizer: the one the manifest names
                "--output_dir",
                str(run),
                "--model",
                "tiny",
                "--config",
                overrides,
                "--strategy",
                "cpu",
                "--per_replica_batch_size",
                "16",
                "--train_steps",
                "30",
                "--eval_every",
                "15",
                "--save_every",
                "15",
                "--learning_rate",
                "3e-3",
                "--verbose",
                "0",
            ]
        )
        == 0
    )
    assert (
        json.loads((run / "run_config.json").read_text())["tokenizer"]["fingerprint"]
        == json.loads((data / "train" / "manifest.json").read_text())["tokenizer"]["fingerprint"]
    )
    history = json.loads((run / "history.json").read_text())
    assert history[-1]["eval_loss"] < history[0]["eval_loss"]
    paths = export.export(str(run), str(tmp_path / "export"), "all")

    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(paths["hf"])
    model = AutoModelForMaskedLM.from_pretrained(paths["hf"]).eval()
    text = f"Return the {tokenizer.mask_token} of the list."
    with torch.no_grad():
        logits = model(**tokenizer(text, return_tensors="pt")).logits[0]
    position = tokenizer(text)["input_ids"].index(tokenizer.mask_token_id)
    hf_top = tokenizer.convert_ids_to_tokens(int(np.argmax(logits[position].numpy())))
    (keras_top, _), *_ = predict.predict_masks(paths["keras-hub"], [text], top_k=1)[0][0]
    assert tokenizer.convert_tokens_to_string([hf_top]) == keras_top
