"""What a fine-tuning run leaves when it goes wrong or runs again: a diverged seed (no
scores, out of the means, strict JSON), the output folder's lock and clean logs, a SIGTERM
(the complete seeds written, exit 143 in one line), a read-only --card refused before
training, and each task's own identity on the model card. The end-to-end cases fine-tune a
tiny model for 1-2 epochs (~4 s each on TensorFlow); the JAX pass leaves them to it."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.trainer import finetune_data as fd
from trainer.finetuning import card_scores, finetune, protocol, results
from trainer.tasks import metrics

TENSORFLOW_ONLY = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax", reason="fine-tunes: the TensorFlow pass runs it"
)


def _strict(path) -> dict:
    def refuse(constant):
        raise ValueError(f"{path} holds {constant}: not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_non_finite_predictions_are_never_ranked_nor_scored():
    targets = np.arange(6, dtype=np.float64)  # dev sorted by target
    nan = np.full(6, np.nan)
    assert metrics.regression_scores(targets, nan) == dict.fromkeys(metrics.REGRESSION)
    part = np.array([0.0, 1.0, np.inf, 3.0, 4.0, 5.0])
    assert metrics.regression_scores(targets, part)["spearman"] is None
    labels = np.array([0, 1, 0, 1])
    scores = metrics.classification_scores(labels, np.array([0, 1, np.nan, 1]), 2)
    assert set(scores.values()) == {None}
    assert not protocol.better(None, 0.1, "spearman") and not protocol.better(None, None, "mse")


def test_a_diverged_seed_is_collapsed_out_of_every_mean_and_results_json_is_strict(tmp_path):
    good = {"seed": 1, "best_epoch": 1, "dev": {"spearman": 0.5, "mse": 1.0}}
    diverged = {
        "seed": 2,
        "best_epoch": None,
        "dev": None,
        "diverged": "the training loss is nan at epoch 1, batch 2",
        "epochs": [{"epoch": 1, "train_loss": float("nan")}],
    }
    summary = protocol.summarise([good, diverged], "spearman", {"spearman": 0.0, "mse": 9.0})
    assert summary["dev"]["spearman"]["n"] == 1 and summary["dev"]["spearman"]["mean"] == 0.5
    assert summary["collapsed_seeds"] == [2] and summary["seeds_in_mean"] == [1]
    assert summary["diverged_seeds"][0]["seed"] == 2
    document = {"scores": {"seeds": [good, diverged], "summary": summary}}
    results.write(str(tmp_path), document)
    found = _strict(tmp_path / "results.json")
    assert found["scores"]["seeds"][1]["epochs"][0]["train_loss"] is None
    assert found["non_finite"] == {"scores.seeds[1].epochs[0].train_loss": "nan"}


def _files(tmp_path, regression=False, huge=False) -> list[str]:
    rows = {
        split: fd.examples(count, seed, False, regression)
        for split, seed, count in (("train", 0, 16), ("dev", 1, 8))
    }
    if huge:  # a squared error past float32's range: the loss is inf at the first batch
        for split in rows.values():
            for i, row in enumerate(split):
                row["label"] = (i + 1) * 1e30
        rows["dev"].sort(key=lambda row: row["label"])
    return [
        *("--train", fd.write(tmp_path / "train.csv", rows["train"])),
        *("--dev", fd.write(tmp_path / "dev.csv", rows["dev"])),
        *("--text_column", "sentence", "--batch_size", "8", "--learning_rate", "1e-3"),
    ]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return fd.export_preset(tmp_path_factory.mktemp("model"), "roberta")


@TENSORFLOW_ONLY
def test_a_diverging_regression_stops_each_seed_in_one_line_and_reports_no_score(
    export, tmp_path, capsys
):
    out = tmp_path / "out"
    args = ["--model", export, *_files(tmp_path, regression=True, huge=True)]
    args += ["--task_type", "regression", "--seeds", "1,2", "--epochs", "2"]
    assert finetune.main([*args, "--output_dir", str(out)]) == 0
    found = _strict(out / "results.json")
    for record in found["scores"]["seeds"]:
        assert record["collapsed"] and "training loss is inf at epoch 1" in record["diverged"]
        assert record["dev"] is None and len(record["epochs"]) == 1
    assert "dev" not in found["scores"]["summary"]
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if "diverged (" in line]
    assert len(lines) == 2 and "lower --learning_rate" in lines[0], printed
    assert "DIVERGED" in printed


@TENSORFLOW_ONLY
def test_a_rerun_starts_clean_logs_and_a_second_run_on_the_folder_is_refused(
    export, tmp_path, capsys
):
    from common import run_lock

    out = tmp_path / "out"
    args = ["--model", export, *_files(tmp_path), "--seeds", "1", "--epochs", "1"]
    args += ["--output_dir", str(out)]
    earlier = out / "logs" / "seed-1" / "events.out.tfevents.1.earlier-run"
    earlier.parent.mkdir(parents=True)
    earlier.write_bytes(b"")
    assert finetune.main(args) == 0
    assert os.listdir(out / "logs" / "seed-1") != [earlier.name]
    assert not earlier.exists()  # the earlier run's events went
    assert not (out / "_LOCK").exists()
    capsys.readouterr()
    run_lock.acquire(str(out), "t-other-run", "trainer (test)", kind=run_lock.TRAINING)
    try:
        assert finetune.main(args) == 2
    finally:
        run_lock.release(str(out), "t-other-run")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is being written by training run t-other-run" in err[0], err
    assert len(os.listdir(out / "logs" / "seed-1")) == 1  # untouched


@pytest.mark.parametrize(
    "theirs",
    [
        "logs/train/events.out.tfevents.1.pretraining",  # the pretraining run's own folder
        "logs/validation/events.out.tfevents.2.pretraining",
        "logs/notes.txt",
        "logs/seed-1x/events.out.tfevents.3.other",
    ],
)
def test_a_logs_folder_holding_what_no_fine_tune_wrote_is_refused_and_kept(
    export, tmp_path, capsys, theirs
):
    out = tmp_path / "run"
    ours = out / "logs" / "seed-1" / "events.out.tfevents.1.earlier-fine-tune"
    for path in (out / theirs, ours):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"kept")
    args = ["--model", export, *_files(tmp_path), "--seeds", "1", "--epochs", "1"]
    assert finetune.main([*args, "--output_dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "which no fine-tune wrote" in err[0] and theirs in err[0], err
    assert (out / theirs).read_bytes() == b"kept" and ours.read_bytes() == b"kept"
    assert not (out / "results.json").exists() and not (out / "_LOCK").exists()


def test_a_glue_task_folder_keeps_the_logs_no_fine_tune_wrote(tmp_path):
    from trainer.finetuning import output_folder

    task = tmp_path / "out" / "rte"
    mine = task / "logs" / "seed-2" / "events.out.tfevents.1.x"
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"")
    output_folder.clear_earlier_run(str(tmp_path / "out"), [str(task)])
    assert not mine.parent.exists()  # an earlier fine-tune's seed logs go
    (task / "logs" / "README").write_text("mine")
    with pytest.raises(output_folder.OutputFolderError, match="no fine-tune wrote"):
        output_folder.clear_earlier_run(str(tmp_path / "out"), [str(task)])
    assert (task / "logs" / "README").read_text() == "mine"


@pytest.mark.slow  # a fresh process
@TENSORFLOW_ONLY
def test_sigterm_in_a_seed_writes_the_complete_seeds_and_exits_143_in_one_line(export, tmp_path):
    """A fresh process (SIGTERM's handler must be the command's own): it sends itself
    SIGTERM at seed 2's third batch."""
    out = tmp_path / "out"
    args = ["--model", export, *_files(tmp_path), "--seeds", "1,2", "--epochs", "2"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.trainer.killable_finetune",
            "sigterm_at:7",  # 2 batches an epoch, 2 epochs: seed 2's 3rd batch
            *args,
            "--output_dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 143, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "seed 2, epoch 2, batch 1" in errors[0], errors
    assert "the 1 complete seed(s)" in errors[0] and "starts afresh" in errors[0]
    found = _strict(out / "results.json")
    assert [r["seed"] for r in found["scores"]["seeds"]] == [1]
    assert "seed 2, epoch 2" in found["interrupted"]


@pytest.fixture
def read_only(tmp_path):
    """A folder nothing can be created in: chmod, or for root (whom mode bits do not stop)
    the immutable attribute, where the file system has it."""
    folder = tmp_path / "card"
    folder.mkdir()
    (folder / "README.md").write_text("---\nmodel_name: tiny\n---\n\n# Body\n")
    root = os.geteuid() == 0
    if root:
        try:
            refused = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode
        except FileNotFoundError:  # no chattr on this machine
            refused = True
        if refused:
            pytest.skip("running as root without chattr +i: no read-only folder to test")
    else:
        folder.chmod(0o555)
    yield folder
    if root:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    else:
        folder.chmod(0o755)


@TENSORFLOW_ONLY
def test_a_card_that_cannot_be_written_is_refused_before_training(
    export, tmp_path, read_only, capsys
):
    out = tmp_path / "out"
    args = ["--model", export, *_files(tmp_path), "--seeds", "1", "--epochs", "1"]
    code = finetune.main([*args, "--output_dir", str(out), "--card", str(read_only)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "cannot write the model card" in err[0], err
    assert not (out / "logs").exists()  # no seed trained


def _own_document(dev: str, accuracy: float) -> dict:
    return {
        "task": {"type": "classification", "labels": ["no", "yes"]},
        "scores": {
            "seeds": [{"seed": 1}],
            "summary": {"dev": {"accuracy": {"mean": accuracy}}},
        },
        "data": {"dev": {"path": dev}},
        "dataset": None,
    }


def test_tasks_of_own_files_keep_their_own_card_entries_and_a_rerun_replaces_its_own(tmp_path):
    from huggingface_hub import ModelCard

    readme = tmp_path / "README.md"
    readme.write_text("---\nmodel_name: tiny\n---\n\n# Body\n")

    def add(dev: str, value: float) -> None:
        card_scores.add([str(readme)], card_scores.entries(_own_document(dev, value)))

    add("data/sentiment/dev.csv", 0.7)
    add("data/topic/dev.csv", 0.4)
    add("data/sentiment/dev.csv", 0.8)  # a rerun of the first task
    found = {
        (r.dataset_name, r.metric_value) for r in ModelCard.load(str(readme)).data.eval_results
    }
    assert found == {("sentiment/dev.csv", 0.8), ("topic/dev.csv", 0.4)}


def test_a_save_to_disk_folder_is_local_data_on_the_card_never_its_path():
    source = {
        "id": "/home/me/copies/imdb",
        "config": None,
        "revision": None,
        "splits": {"train": "train", "dev": "validation"},
        "fingerprints": {"train": "aa11", "dev": "bb22"},
        "local": True,
    }
    document = _own_document("/home/me/copies/imdb validation", 0.6)
    document["dataset"] = source
    (entry,) = [e for e in card_scores.entries(document) if e.metric_type == "accuracy"]
    fields = (entry.dataset_type, entry.dataset_name, entry.dataset_config, entry.dataset_split)
    assert fields == ("custom", "local data bb22", "local data bb22", "validation")
    assert entry.dataset_revision is None


def test_the_card_says_which_seeds_its_mean_leaves_out_and_which_collapsed_ones_it_counts():
    document = _own_document("data/sentiment/dev.csv", 0.7)
    document["scores"]["summary"].update(
        seeds_in_mean=[1, 3],
        collapsed_seeds=[2, 3],
        diverged_seeds=[{"seed": 2, "reason": "the training loss is nan at epoch 1, batch 1"}],
    )
    (entry,) = [e for e in card_scores.entries(document) if e.metric_type == "accuracy"]
    assert entry.metric_name == (
        "accuracy (dev, mean of 2 seed(s); seed 3 collapsed, counted; seed 2 diverged, left out)"
    )
