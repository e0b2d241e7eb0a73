"""--push_to on export, tokenizer training and the trainer, exercised up to the network with
the real libraries (huggingface_hub, keras_hub.upload_preset) against the stand-in Hub of
tests/support/hub.py. What that proves and does not: see its docstring (no real push)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from huggingface_hub import ModelCard

from common import publish
from tests.support.hub import TOKEN
from tests.trainer.mlm_data import STEPS, task_args
from trainer.pretraining import task
from trainer.release import export, push

PUSH = publish.PushFlags("hf://org/tiny", "en", "apache-2.0")


def _all_files(folder):
    return {
        os.path.relpath(os.path.join(d, f), folder)
        for d, _, files in os.walk(folder)
        for f in files
    }


def test_export_pushes_both_formats_each_with_its_card(hub, prepared_run, tmp_path):
    paths, pushed = export.export_and_push(str(prepared_run["run"]), str(tmp_path), "all", PUSH)
    assert pushed == {"keras-hub": "hf://org/tiny-keras-hub", "hf": f"{hub.url}/org/tiny"}
    for fmt, repo in (("hf", "org/tiny"), ("keras-hub", "org/tiny-keras-hub")):
        remote = hub.files(repo)
        assert set(remote) == _all_files(paths[fmt]), fmt  # every file, nothing else
        with open(os.path.join(paths[fmt], "README.md"), "rb") as f:
            assert remote["README.md"] == f.read(), fmt  # our card, not keras-hub's
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(hub.files("org/tiny"))
    assert {
        "config.json",
        "task.json",
        "model.weights.h5",
        "tokenizer/tokenizer.json",
        "run_config.json",
    } <= set(hub.files("org/tiny-keras-hub"))
    card = ModelCard(hub.files("org/tiny")["README.md"].decode())
    assert card.data.library_name == "transformers" and card.data.language == "en"
    assert 'pipeline("fill-mask", model="org/tiny")' in card.text
    # Every write carried HF_TOKEN, taken the library's way. (huggingface_hub 2.4 also GETs a
    # public registry, /api/agent-harnesses, without a token, for its user-agent string.)
    writes = [r for r in hub.state.requests if r["method"] == "POST"]
    assert writes and all(r["authorized"] for r in writes)
    # The library checked each card before uploading it: the transformers folder's once, the
    # preset's twice (alone first, see push.push_preset, then with its folder).
    assert hub.state.cards_checked == 3


def test_keras_hub_alone_would_replace_our_card(hub, prepared_run, tmp_path):
    """Why push_preset uploads the card first: keras-hub 0.32 writes its generic card over
    ours on a repository without one, and deletes README.md from the folder afterwards."""
    import keras_hub

    paths = export.export(str(prepared_run["run"]), str(tmp_path), "keras-hub")
    keras_hub.upload_preset("hf://org/plain", paths["keras-hub"])
    assert not os.path.exists(os.path.join(paths["keras-hub"], "README.md"))
    assert b"mlm_pretrain" not in hub.files("org/plain")["README.md"]


def test_a_rejected_token_is_one_line_without_the_token(
    hub, prepared_run, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    code = export.main(
        [
            "--checkpoint",
            str(prepared_run["run"]),
            "--output_dir",
            str(tmp_path),
            "--format",
            "hf",
            "--push_to",
            "hf://org/tiny",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("error: push to hf://org/tiny failed: Client error '401")
    assert "(check the token: HF_TOKEN or `hf auth login`" in err
    assert "hf_wrong" not in err


def _no_hf_token(monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))


def test_no_token_fails_before_anything_is_written(
    hub, prepared_run, tmp_path, capsys, monkeypatch
):
    _no_hf_token(monkeypatch, tmp_path)
    out = tmp_path / "out"
    code = export.main(
        [
            "--checkpoint",
            str(prepared_run["run"]),
            "--output_dir",
            str(out),
            "--push_to",
            "hf://org/tiny",
        ]
    )
    assert code == 2 and not out.exists() and not hub.state.requests
    assert "no Hugging Face token" in capsys.readouterr().err


def test_kaggle_without_credentials_fails_first(prepared_run, tmp_path, monkeypatch):
    for name in ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "no-kaggle"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(push.PushError, match="no Kaggle credentials"):
        export.export_and_push(
            str(prepared_run["run"]),
            str(tmp_path / "out"),
            "all",
            publish.PushFlags("kaggle://me/tiny/keras/v1"),
        )
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_export_cli_pushes_with_hf_endpoint_in_a_subprocess(hub, prepared_run, tmp_path):
    """The way a user points the library elsewhere (HF_ENDPOINT, HF_TOKEN in the env)."""
    env = {**os.environ, **hub.env}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.export",
            "--checkpoint",
            str(prepared_run["run"]),
            "--output_dir",
            str(tmp_path),
            "--format",
            "hf",
            "--push_to",
            "hf://org/cli",
            "--license",
            "mit",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"(pushed to {hub.url}/org/cli)" in result.stdout
    assert ModelCard(hub.files("org/cli")["README.md"].decode()).data.license == "mit"


def test_tokenizer_push_with_its_card(hub, corpus_jsonl, tmp_path):
    from beam_pipelines import train_tokenizer

    out = tmp_path / "tok"
    assert (
        train_tokenizer.main(
            [
                "--input",
                str(corpus_jsonl),
                "--output_dir",
                str(out),
                "--model",
                "bpe",
                "--vocab_size",
                "400",
                "--push_to",
                "hf://org/tok",
            ]
        )
        == 0
    )
    remote = hub.files("org/tok")
    assert {
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "training_info.json",
        "README.md",
    } <= set(remote)
    assert remote["tokenizer.json"] == (out / "tokenizer.json").read_bytes()
    card = ModelCard(remote["README.md"].decode())
    assert card.data.library_name == "tokenizers"
    assert 'AutoTokenizer.from_pretrained("org/tok")' in card.text


def test_tokenizer_push_target_is_checked_first(tmp_path, corpus_jsonl, capsys):
    from beam_pipelines import train_tokenizer

    code = train_tokenizer.main(
        [
            "--input",
            str(corpus_jsonl),
            "--output_dir",
            str(tmp_path / "tok"),
            "--push_to",
            "kaggle://a/b/keras/c",
        ]
    )
    assert code == 2 and not (tmp_path / "tok").exists()
    assert "a tokenizer is pushed to a Hugging Face repository" in capsys.readouterr().err


@pytest.mark.slow
def test_trainer_pushes_the_export_at_the_end(hub, corpus, tmp_path):
    out = tmp_path / "run"
    assert (
        task.main(
            task_args(
                corpus,
                out,
                "--train_steps",
                "4",
                "--eval_every",
                "2",
                "--save_every",
                "2",
                "--push_to",
                "hf://org/run",
                "--language",
                "en",
            )
        )
        == 0
    )
    assert set(hub.files("org/run")) == _all_files(out / "export" / "hf")
    assert set(hub.files("org/run-keras-hub")) == _all_files(out / "export" / "keras-hub")
    card = ModelCard(hub.files("org/run")["README.md"].decode())
    assert "| optimizer steps | 4 (of 4 planned) |" in card.text
    for folder, _, files in os.walk(out):  # the token went nowhere but the HTTP header
        for name in files:
            with open(os.path.join(folder, name), "rb") as f:
                assert TOKEN.encode() not in f.read(), name


def test_trainer_refuses_a_bad_target_before_any_work(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        task.main(task_args(corpus, out, *STEPS, "--push_to", "hf://no-org"))
    assert exit_info.value.code == 2 and not out.exists()
    assert "hf://ORG/NAME" in capsys.readouterr().err


def test_trainer_without_a_token_fails_before_training(corpus, tmp_path, monkeypatch, capsys):
    _no_hf_token(monkeypatch, tmp_path)
    out = tmp_path / "run"
    assert task.main(task_args(corpus, out, *STEPS, "--push_to", "hf://org/run")) == 2
    assert "no Hugging Face token" in capsys.readouterr().err
    assert not (out / "checkpoints").exists()


def test_kaggle_push_reaches_the_network_through_kagglehub(kaggle, prepared_run, tmp_path):
    """Up to the network only: the recorder answers 503 (tests/support/kaggle.py)."""
    with pytest.raises(push.PushError) as err:
        export.export_and_push(
            str(prepared_run["run"]),
            str(tmp_path),
            "all",
            publish.PushFlags("kaggle://standin-user/tiny/keras/v1"),
        )
    message = str(err.value)
    assert message.startswith("push to kaggle://standin-user/tiny/keras/v1 failed: ")
    assert "\n" not in message and "standin-key" not in message
    first = kaggle[0]  # kagglehub first asks whether the model exists, with our names
    assert first["path"].endswith("ModelApiService/GetModel") and first["authorized"]
    assert b'"standin-user"' in first["body"] and b'"tiny"' in first["body"]
