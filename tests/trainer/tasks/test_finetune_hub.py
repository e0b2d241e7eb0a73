"""Hugging Face datasets by name (`--hf_dataset`, and `--task` without `--glue_dir`): resolved
offline from a datasets cache built in tmp_path (tests/trainer/hub_data.py: the layout a
by-name `load_dataset` leaves), the splits chosen and said, the commit recorded, the
ClassLabel's names kept in its order; a name that cannot be fetched is one line. Reading
takes well under a second; the end-to-end fine-tune runs on the TensorFlow pass only."""

import json
import os
import socket

import pytest

from common.errors import UserError
from tests.trainer import finetune_data as fd
from tests.trainer import hub_data
from trainer.finetuning import card_scores, finetune, jobs
from trainer.tasks import glue, hub

PAIRS = ["not_equivalent", "equivalent"]  # sorted, the names would swap: class 1 must stay


def _columns(count: int, seed: int, label=None) -> dict:
    rows = fd.examples(count, seed, True, False)  # "yes"/"no" by the first text's last word
    return {
        "sentence1": [r["sentence"] for r in rows],
        "sentence2": [r["second"] for r in rows],
        "label": [label if label is not None else int(r["label"] == "yes") for r in rows],
    }


@pytest.fixture
def cache(tmp_path, monkeypatch):
    import datasets

    features = datasets.Features(
        {
            "sentence1": datasets.Value("string"),
            "sentence2": datasets.Value("string"),
            "label": datasets.ClassLabel(names=PAIRS),
        }
    )
    root = tmp_path / "hf-cache"
    hub_data.offline(monkeypatch, root)
    splits = {
        "train": _columns(32, 0),
        "validation": _columns(12, 1),
        "test": _columns(6, 2, label=-1),  # no public labels, as GLUE's test splits
    }
    hub_data.add(root, "someone/paraphrase", "pairs", splits, features)
    hub_data.add(root, "nyu-mll/glue", "mrpc", splits, features, commit="f" * 40)
    return root


@pytest.fixture(scope="module")
def described(tmp_path_factory):
    """A model folder that passes for an export until its weights are loaded (config.json,
    task.json, tokenizer/): the data is read, and refused, before that."""
    from tests.trainer import mlm_data

    folder = tmp_path_factory.mktemp("described")
    (folder / "config.json").write_text(
        json.dumps({"registered_name": "keras_hub>RobertaBackbone", "config": {}})
    )
    (folder / "task.json").write_text(json.dumps({"registered_name": "keras_hub>RobertaMaskedLM"}))
    mlm_data.make_tokenizer(folder / "tokenizer")
    return str(folder)


def _config(**flags) -> finetune.FinetuneFlags:
    return finetune.FinetuneFlags(model="m", output_dir="o", **flags)


def test_a_dataset_by_name_resolves_offline_with_its_splits_commit_and_class_order(cache, capsys):
    config = _config(
        hf_dataset="someone/paraphrase",
        hf_config="pairs",
        text_column="sentence1",
        text_pair_column="sentence2",
    )
    splits, names, targets, source = jobs.read_task(config)
    assert set(splits) == {"train", "dev"} and len(splits["dev"]) == 12
    assert names == tuple(PAIRS)  # the ClassLabel's order, not sorted
    assert splits["train"].raw_labels[0] in PAIRS and set(targets["train"]) == {0, 1}
    assert source["id"] == "someone/paraphrase" and source["config"] == "pairs"
    assert source["revision"] == hub_data.COMMIT
    assert source["splits"] == {"train": "train", "dev": "validation"}
    assert set(source["fingerprints"]) == {"train", "dev"}
    said = capsys.readouterr().out
    assert "train = train (32), dev = validation (12)" in said
    assert "test split has no labels (not scored)" in said


def test_the_local_copy_the_message_asks_for_a_save_to_disk_folder_reads_the_same(cache, tmp_path):
    copy = str(tmp_path / "copy")
    import datasets

    datasets.load_dataset("someone/paraphrase", "pairs").save_to_disk(copy)
    config = _config(hf_dataset=copy, text_column="sentence1", text_pair_column="sentence2")
    splits, names, _, source = jobs.read_task(config)
    assert names == tuple(PAIRS) and len(splits["train"]) == 32
    assert source["revision"] is None and source["splits"]["dev"] == "validation"


def test_named_splits_are_used_and_a_missing_one_is_one_line(cache):
    config = _config(
        hf_dataset="someone/paraphrase",
        hf_config="pairs",
        text_column="sentence1",
        text_pair_column="sentence2",
        dev_split="train",
        test_split="none",
    )
    _, _, _, source = jobs.read_task(config)
    assert source["splits"] == {"train": "train", "dev": "train"}
    loaded = hub.load("someone/paraphrase", "pairs", hint="x")
    picked = hub.choose_splits(loaded, {"train": None, "dev": "test", "test": None})
    assert picked == {"train": "train", "dev": "test"}  # test selects: not scored twice
    with pytest.raises(UserError, match="has no split 'dev' .--dev_split.; its splits: train"):
        hub.choose_splits(loaded, {"train": None, "dev": "dev", "test": None})
    del loaded.splits["validation"]
    with pytest.raises(UserError, match="has no validation or dev or valid split"):
        hub.choose_splits(loaded, {"train": None, "dev": None, "test": None})


def _main(capsys, *args, model="m") -> tuple[int, str]:
    try:
        code = finetune.main(["--model", model, "--output_dir", "o", *args])
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err.strip()


def test_a_dataset_that_cannot_be_fetched_offline_is_one_line_and_exit_2(cache, described, capsys):
    code, err = _main(capsys, "--hf_dataset", "someone/absent", model=described)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: could not fetch the Hugging Face dataset 'someone/absent'")
    assert "(offline mode is on)" in err and "save_to_disk(DIR) and pass --hf_dataset DIR" in err
    code, err = _main(capsys, "--task", "rte", model=described)  # the cache holds only mrpc
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "could not fetch the Hugging Face dataset 'nyu-mll/glue' (config 'rte')" in err
    assert "--glue_dir DIR" in err


def test_a_failed_connection_falls_back_on_the_cache_or_is_one_line(
    cache, described, monkeypatch, capsys
):
    import datasets
    import huggingface_hub.constants
    from huggingface_hub.utils import _http

    with socket.socket() as closed:  # a port nothing listens on: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(_http.time, "sleep", lambda seconds: None)  # its 5 retries wait 23 s
    loaded = hub.load("someone/paraphrase", "pairs", hint="x")
    assert loaded.revision == hub_data.COMMIT
    code, err = _main(capsys, "--hf_dataset", "someone/absent", model=described)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "could not fetch" in err and "offline mode" not in err


def test_task_without_glue_dir_loads_nyu_mll_glue_by_name(cache, capsys):
    splits, source = glue.read_hub(glue.TASKS["mrpc"])
    said = "dataset: nyu-mll/glue (mrpc) at revision " + "f" * 40
    assert capsys.readouterr().out.startswith(said + ": train = train (32), dev = validation (12)")
    assert set(splits) == {"train", "dev"} and len(splits["dev"]) == 12
    assert set(splits["train"].raw_labels) == {"0", "1"}  # equivalent is GLUE's 1
    assert source["id"] == "nyu-mll/glue" and source["revision"] == "f" * 40
    tasks = jobs.build(_config(task="mrpc"), ("base", "hidden_dim 768"))
    assert tasks[0].dataset["splits"] == {"train": "train", "dev": "validation"}


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--hf_dataset", "a/b", "--train", "t.csv"], "--hf_dataset names the data: drop --train"),
        (["--hf_dataset", "a/b", "--task", "rte"], "drop --task"),
        (
            ["--train_split", "x", "--train", "t", "--dev", "d"],
            "--train_split need(s) --hf_dataset",
        ),
        (["--task", "rte", "--glue_dir", "g", "--hf_revision", "main"], "not with --glue_dir"),
    ],
)
def test_dataset_flags_that_do_not_fit_together_are_one_line(flags, message, capsys):
    code, err = _main(capsys, *flags)
    assert code == 2 and message in err and len(err.splitlines()) == 1, err


@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax", reason="one fine-tune: the TensorFlow pass runs it"
)
def test_finetune_by_name_records_dataset_commit_and_class_names_in_results_and_card(
    cache, tmp_path
):
    export = fd.export_preset(tmp_path, "roberta")
    card = tmp_path / "card"
    card.mkdir()
    (card / "README.md").write_text("---\nmodel_name: tiny\n---\n\n# Body\n")
    out = tmp_path / "out"
    args = ["--model", export, "--hf_dataset", "someone/paraphrase", "--hf_config", "pairs"]
    args += ["--text_column", "sentence1", "--text_pair_column", "sentence2", "--metric", "f1"]
    args += ["--output_dir", str(out), "--seeds", "1", "--epochs", "1", "--batch_size", "8"]
    assert finetune.main([*args, "--learning_rate", "1e-3", "--card", str(card)]) == 0
    found = json.loads((out / "results.json").read_text())
    assert found["dataset"]["revision"] == hub_data.COMMIT
    assert found["dataset"]["splits"] == {"train": "train", "dev": "validation"}
    assert found["task"]["labels"] == PAIRS and "test" not in found["data"]
    assert found["data"]["dev"]["path"] == "someone/paraphrase (pairs) validation"
    from huggingface_hub import ModelCard

    results = ModelCard.load(str(card / "README.md")).data.eval_results
    f1 = next(r for r in results if r.metric_type == "f1" and not r.metric_config)
    assert (f1.dataset_type, f1.dataset_config, f1.dataset_split) == (
        "someone/paraphrase",
        "pairs",
        "validation",
    )
    assert f1.dataset_revision == hub_data.COMMIT
    assert f1.metric_args == {"labels": PAIRS, "pos_label": "equivalent"}
    assert card_scores.METRIC_TYPES["f1"] == "f1"


@pytest.mark.parametrize("flag", ["--hf_config", "--hf_revision"])
def test_a_save_to_disk_folder_with_a_config_or_revision_is_one_line(cache, tmp_path, capsys, flag):
    """The folder holds one configuration at one revision: the flag would be ignored, yet
    recorded in results.json and on the card as if it had chosen the data."""
    import datasets

    copy = str(tmp_path / "copy")
    datasets.load_dataset("someone/paraphrase", "pairs").save_to_disk(copy)
    capsys.readouterr()  # datasets' progress bars
    code, err = _main(capsys, "--hf_dataset", copy, flag, "pairs", "--text_column", "sentence1")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "save_to_disk folder" in err and f"drop {flag}" in err, err
    loaded = hub.load(copy, hint="--hf_dataset DIR")
    assert loaded.provenance({"dev": "validation"})["local"] is True
