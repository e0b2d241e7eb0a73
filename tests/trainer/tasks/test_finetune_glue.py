"""GLUE's own layout (`--task`), the GLUE score worked out by hand, the scores in an export's
model cards, and one `--task glue` run end to end on a tiny fake GLUE folder
(tests/trainer/glue_data.py: GLUE's data cannot ship). Reading and arithmetic take
milliseconds; the end-to-end run fine-tunes 8 tasks and runs on the TensorFlow pass only."""

import json
import os

import pytest

from common.errors import UserError
from tests.trainer import finetune_data as fd
from tests.trainer import glue_data
from trainer.finetuning import card_scores, finetune
from trainer.tasks import glue


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    return str(glue_data.fake_glue(tmp_path_factory.mktemp("glue")))


@pytest.mark.parametrize(
    "name, pair, train, labels",
    [
        ("cola", False, 12, {"0", "1"}),  # no header row: the first row is an example
        ("sst2", False, 12, {"0", "1"}),
        ("mrpc", True, 12, {"0", "1"}),  # the header's byte-order mark does not hide "Quality"
        ("qqp", True, 12, {"0", "1"}),  # + one row lacking its fields, skipped and counted
        ("stsb", True, 12, None),
        ("mnli", True, 12, set(glue_data.NLI)),
        ("qnli", True, 12, set(glue_data.ENTAIL)),
        ("rte", True, 12, set(glue_data.ENTAIL)),
    ],
)
def test_each_glue_task_reads_its_own_files_columns_and_labels(glue_dir, name, pair, train, labels):
    task = glue.TASKS[name]
    splits = glue.read(glue_dir, task)
    assert len(splits["train"]) == train and len(splits["dev"]) == 6
    assert (splits["train"].pairs is not None) == pair
    assert splits["train"].texts[0].endswith(" w1")  # row 0 has label 0, its text ends w1
    if labels is None:
        assert task.task_type == "regression" and float(splits["train"].raw_labels[1]) > 4
    else:
        assert set(splits["train"].raw_labels) <= labels and set(task.labels) == labels
    assert splits["train"].skipped_malformed == (1 if name == "qqp" else 0)


def test_mnli_reads_gold_labels_and_scores_mismatched_as_accuracy_mm(glue_dir):
    splits = glue.read(glue_dir, glue.TASKS["mnli"])
    assert splits["dev"].path.endswith("MNLI/dev_matched.tsv")
    assert splits["test"].path.endswith("MNLI/dev_mismatched.tsv")
    assert splits["dev"].raw_labels[:3] == ["contradiction", "entailment", "neutral"]
    summary = {"dev": {"accuracy": {"mean": 0.7}}, "test": {"accuracy": {"mean": 0.6}}}
    assert glue.reported(glue.TASKS["mnli"], summary) == {"accuracy": 0.7, "accuracy_mm": 0.6}


def test_class_one_is_glues_positive_class_so_f1_is_mrpcs_and_qqps():
    assert glue.TASKS["mrpc"].labels == ("0", "1") and glue.TASKS["mrpc"].metric == "f1"
    assert glue.TASKS["qqp"].reported == ("accuracy", "f1")
    assert glue.TASKS["cola"].reported == ("mcc",)
    assert glue.TASKS["stsb"].reported == ("pearson", "spearman")


def test_a_save_to_disk_folder_of_nyu_mll_glue_maps_class_names_to_glues_labels(tmp_path):
    import datasets as hf

    mrpc = hf.Features(
        {
            "sentence1": hf.Value("string"),
            "sentence2": hf.Value("string"),
            "label": hf.ClassLabel(names=["not_equivalent", "equivalent"]),
            "idx": hf.Value("int32"),
        }
    )
    rows = {
        "sentence1": ["w1 w2", "w3"],
        "sentence2": ["w4", "w5 w6"],
        "label": [1, 0],
        "idx": [0, 1],
    }
    hf.DatasetDict(
        {split: hf.Dataset.from_dict(rows, features=mrpc) for split in ("train", "validation")}
    ).save_to_disk(str(tmp_path / "mrpc"))
    splits = glue.read(str(tmp_path), glue.TASKS["mrpc"])
    assert splits["train"].raw_labels == ["1", "0"]  # equivalent is GLUE's 1
    assert splits["dev"].pairs == ["w4", "w5 w6"]


def test_the_glue_score_is_the_mean_of_task_means_two_metrics_averaged_first():
    reported = {
        "cola": {"mcc": 0.40},
        "sst2": {"accuracy": 0.90},
        "mrpc": {"accuracy": 0.80, "f1": 0.86},
        "qqp": {"accuracy": 0.88, "f1": 0.84},
        "stsb": {"pearson": 0.85, "spearman": 0.83},
        "mnli": {"accuracy": 0.80, "accuracy_mm": 0.82},
        "qnli": {"accuracy": 0.87},
        "rte": {"accuracy": 0.60},
    }
    score = glue.glue_score(reported)
    by_hand = {
        "cola": 0.40,
        "sst2": 0.90,
        "mrpc": 0.83,
        "qqp": 0.86,
        "stsb": 0.84,
        "mnli": 0.81,
        "qnli": 0.87,
        "rte": 0.60,
    }
    assert score["tasks"] == pytest.approx(by_hand)
    assert score["score"] == pytest.approx(6.11 / 8) and score["complete"]
    assert "mosaicml/examples" in score["source"] and score["left_out"] == glue.LEFT_OUT
    assert not glue.glue_score({"cola": {"mcc": 0.4}})["complete"]


def test_glue_recipes_state_their_source_and_give_the_small_tasks_more_seeds():
    assert "glue_jobs.py" in glue.RECIPE_SOURCE and "MosaicBERT" in glue.RECIPE_SOURCE
    defaults = glue.TASKS["mrpc"].defaults
    assert (defaults.learning_rate, defaults.epochs, defaults.batch_size) == (8e-5, 10, 32)
    assert all(len(glue.TASKS[n].defaults.seeds) == 5 for n in glue.MNLI_STARTED)
    assert len(glue.TASKS["mnli"].defaults.seeds) < len(glue.TASKS["sst2"].defaults.seeds)
    config = finetune.FinetuneFlags(
        model="m", output_dir="o", task="mrpc", glue_dir="g", learning_rate="1e-3"
    )
    assert config.recipe("f1", defaults).learning_rate == 1e-3  # the flag wins
    assert config.recipe("f1", defaults).epochs == 10 and config.seed_list(defaults.seeds) == [
        1,
        2,
        3,
        4,
        5,
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--task", "cola", "--hf_config", "cola"], "--hf_config need(s) --hf_dataset"),
        (["--task", "cola", "--glue_dir", "g", "--train", "t.csv"], "drop --train"),
        (["--task", "rte", "--glue_dir", "g", "--mnli_start"], "--mnli_start needs --task glue"),
        (["--train", "t.csv"], "--train and --dev are required"),
        (
            ["--task", "glue", "--glue_dir", "g", "--card", "e", "--from_scratch"],
            "--card with --from_scratch",
        ),
    ],
)
def test_glue_flags_that_do_not_fit_together_are_one_line(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        finetune.main(["--model", "m", "--output_dir", "o", *args])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and message in err and len(err.splitlines()) == 1


def test_a_glue_folder_without_the_task_or_its_dev_file_is_one_line(tmp_path, glue_dir):
    with pytest.raises(UserError, match="holds neither GLUE's RTE/train.tsv nor"):
        glue.read(str(tmp_path), glue.TASKS["rte"])
    (tmp_path / "MNLI").mkdir()
    (tmp_path / "MNLI" / "train.tsv").write_text(
        open(os.path.join(glue_dir, "MNLI", "train.tsv")).read()
    )
    with pytest.raises(UserError, match="dev_matched.tsv is missing"):
        glue.read(str(tmp_path), glue.TASKS["mnli"])
    (tmp_path / "CoLA").mkdir()
    (tmp_path / "CoLA" / "train.tsv").write_text("sentence\tlabel\n")
    with pytest.raises(UserError, match="holds no complete row"):
        glue.read(str(tmp_path), glue.TASKS["cola"])


def _card(folder, fill_mask=0.3):
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    folder.mkdir(parents=True)
    old = EvalResult(
        task_type="fill-mask",
        dataset_type="custom",
        dataset_name="held-out",
        metric_type="accuracy",
        metric_value=fill_mask,
    )
    data = ModelCardData(model_name="tiny", eval_results=[old])
    (folder / "README.md").write_text(str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n# Body")))


def test_scores_go_into_both_cards_of_an_export_and_read_back_with_the_hub_parser(tmp_path):
    from huggingface_hub import ModelCard

    for fmt in ("keras-hub", "hf"):
        _card(tmp_path / "export" / fmt)
    reported = {name: {m: 0.5 for m in glue.TASKS[name].reported} for name in glue.ORDER}
    reported["mnli"]["accuracy_mm"] = 0.25
    document = {
        "glue": glue.glue_score(reported),
        "tasks": {name: {"reported": values, "seeds": [1, 2]} for name, values in reported.items()},
    }
    paths = card_scores.readmes(str(tmp_path / "export"))
    for _ in range(2):  # a rerun replaces its entries, it does not add them again
        card_scores.add(paths, card_scores.entries(document))
    for path in paths:
        card = ModelCard.load(path)
        results = card.data.eval_results
        assert results[0].task_type == "fill-mask"  # the masked-LM result stays
        glue_results = {
            (r.dataset_config, r.dataset_split, r.metric_type): r.metric_value
            for r in results
            if r.dataset_type == "nyu-mll/glue"
        }
        assert len(glue_results) == 13 and card.text.strip() == "# Body"
        assert glue_results[("cola", "validation", "matthews_correlation")] == 0.5
        assert glue_results[("mnli", "validation_mismatched", "accuracy")] == 0.25
        assert glue_results[("stsb", "validation", "spearmanr")] == 0.5
        assert glue_results[(None, "validation", "glue_score")] == 0.4844  # (7 * 0.5 + 0.375) / 8
    with pytest.raises(UserError, match="no model card there"):
        card_scores.readmes(str(tmp_path))


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax",
    reason="8 fine-tunes end to end: the TensorFlow pass runs it",
)
def test_task_glue_end_to_end_on_a_tiny_fake_glue_folder_with_mnli_start_and_the_card(
    glue_dir, tmp_path, capsys, monkeypatch
):
    from trainer.finetuning import classifier

    compile_for = classifier.compile_for

    def eagerly(model, *args):  # 8 tasks' step graphs would cost ~3 s each to trace here
        compile_for(model, *args)
        model.run_eagerly = True

    monkeypatch.setattr(classifier, "compile_for", eagerly)
    started = []  # (pretrained weights, the weights RTE, MRPC and STS-B start from)
    started_from = classifier.PretrainedBackbone.started_from
    monkeypatch.setattr(
        classifier.PretrainedBackbone,
        "started_from",
        lambda self, w: (started.append((self.weights, w)), started_from(self, w))[1],
    )
    export = fd.export_preset(tmp_path, "roberta")
    _card(tmp_path / "export" / "keras-hub")
    out = tmp_path / "out"
    assert (
        finetune.main(
            [
                "--model",
                export,
                "--task",
                "glue",
                "--glue_dir",
                glue_dir,
                "--output_dir",
                str(out),
                "--epochs",
                "1",
                "--seeds",
                "1",
                "--learning_rate",
                "1e-3",
                "--batch_size",
                "8",
                "--mnli_start",
                "--card",
                str(tmp_path / "export"),
            ]
        )
        == 0
    )
    summary = json.loads((out / "results.json").read_text())
    assert set(summary["tasks"]) == set(glue.ORDER) and summary["glue"]["complete"]
    assert set(summary["tasks"]["mnli"]["reported"]) == {"accuracy", "accuracy_mm"}
    by_hand = [sum(t["reported"].values()) / len(t["reported"]) for t in summary["tasks"].values()]
    assert summary["glue"]["score"] == pytest.approx(sum(by_hand) / 8)
    import numpy as np

    assert len(started) == 3 and all(w is started[0][1] for _, w in started)
    assert not all(np.array_equal(a, b) for a, b in zip(*started[0]))  # MNLI moved them
    rte = json.loads((out / "rte" / "results.json").read_text())
    assert rte["task"]["start"].startswith("MNLI") and rte["protocol"]["epochs"] == 1
    qqp = json.loads((out / "qqp" / "results.json").read_text())
    assert qqp["data"]["train"]["skipped_malformed"] == 1
    assert json.loads((out / "cola" / "results.json").read_text())["scores"]["metric"] == "mcc"
    printed = capsys.readouterr().out
    assert "GLUE score:" in printed and "accuracy_mm" in printed and "dev_mm accuracy" in printed
    card = (tmp_path / "export" / "keras-hub" / "README.md").read_text()
    assert "nyu-mll/glue" in card and "glue_score" in card


def test_card_entries_of_one_glue_task_and_of_own_files_name_their_dataset():
    summary = {"dev": {m: {"mean": 0.5} for m in ("accuracy", "f1", "macro_f1", "mcc")}}
    document = {
        "task": {"glue": "mrpc", "reported": ["accuracy", "f1"], "type": "classification"},
        "scores": {"seeds": [{}, {}], "summary": summary},
        "data": {"dev": {"path": "/data/pairs/dev.tsv"}},
    }
    mrpc = card_scores.entries(document)
    assert [(r.dataset_config, r.metric_type) for r in mrpc] == [
        ("mrpc", "accuracy"),
        ("mrpc", "f1"),
    ]
    assert mrpc[0].metric_name == "accuracy (dev, mean of 2 seed(s))"
    document["task"] = {"type": "classification"}
    own = card_scores.entries(document)
    assert {(r.dataset_type, r.dataset_name, r.dataset_split) for r in own} == {
        ("custom", "pairs/dev.tsv", "dev")  # the dev file's folder and name: the task's own
    }
    assert [(r.metric_type, r.metric_config) for r in own] == [
        ("accuracy", None),
        ("f1", None),
        ("f1", "macro"),
        ("matthews_correlation", None),
    ]


def test_a_label_that_is_not_the_tasks_is_one_line_and_exit_2(glue_dir, tmp_path, capsys):
    import shutil

    copy = tmp_path / "glue"
    shutil.copytree(glue_dir, copy)
    dev = copy / "RTE" / "dev.tsv"
    dev.write_text(dev.read_text().replace("\tnot_entailment\n", "\tmaybe\n", 1))
    export = fd.export_preset(tmp_path, "roberta")
    code = finetune.main(
        [
            "--model",
            export,
            "--task",
            "rte",
            "--glue_dir",
            str(copy),
            "--output_dir",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "RTE/dev.tsv row 1: label 'maybe' is not one of GLUE's RTE labels" in err


# GLUE's TSV layouts, row for row, as huggingface/datasets' datasets/glue/glue.py reads them and
# download_glue_data.py writes MRPC (header copied from msr_paraphrase_train.txt, BOM and all).
# A: an unbalanced quote opening a field; B: a quoted phrase opening one. Read with csv's
# default quoting, A would swallow the rest of the file and B would lose its quotes.
A, B = '"w5 w6 he said', '"w2 w3" she said'
_STS = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
_MNLI = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\t{labels}\tgold_label"
)
_NLI_ROW = "{i}\t1\t1n\tfiction\t( a )\t( b )\t(ROOT a)\t(ROOT b)\t{x}\t{y}\t{votes}{gold}"
LAYOUTS = {  # task: (header or None, rows with {x} {y} for the texts), labels expected
    "cola": (None, ["gj04\t1\t\t{x}", "gj04\t0\t*\t{y}"], ["1", "0"]),
    "sst2": ("sentence\tlabel", ["{x}\t1", "{y}\t0"], ["1", "0"]),
    "mrpc": (
        "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String",
        ["1\t11\t12\t{x}\t{y}", "0\t13\t14\t{y}\t{x}"],
        ["1", "0"],
    ),
    "qqp": (
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
        ["0\t1\t2\t{x}\t{y}\t1", "1\t3\t4\t{y}\t{x}\t0"],
        ["1", "0"],
    ),
    "stsb": (
        _STS,
        ["0\tmain-news\tx\t2012\t1\tnone\tnone\t{x}\t{y}\t5.000"]
        + ["1\tmain-news\tx\t2012\t2\tnone\tnone\t{y}\t{x}\t0.500"],
        ["5.000", "0.500"],
    ),
    "mnli": (
        _MNLI,
        [_NLI_ROW.format(i=0, x="{x}", y="{y}", votes="{votes}", gold="neutral")]
        + [_NLI_ROW.format(i=1, x="{y}", y="{y}", votes="{votes}", gold="contradiction")],
        ["neutral", "contradiction"],
    ),
    "qnli": (
        "index\tquestion\tsentence\tlabel",
        ["0\t{x}\t{y}\tentailment", "1\t{y}\t{x}\tnot_entailment"],
        ["entailment", "not_entailment"],
    ),
    "rte": (
        "index\tsentence1\tsentence2\tlabel",
        ["0\t{x}\t{y}\tentailment", "1\t{y}\t{x}\tnot_entailment"],
        ["entailment", "not_entailment"],
    ),
}


def _layout_file(path, name: str, dev: bool) -> None:
    header, rows, labels = LAYOUTS[name]
    voters = 5 if dev else 1  # MNLI: one annotator's label in train, five in the dev files
    if header and name == "mnli":
        header = header.format(labels="\t".join(f"label{i}" for i in range(1, voters + 1)))
    lines = [header] if header else []
    for row, label in zip(rows, labels):
        row = row.replace("{votes}", f"{label}\t" * voters)
        lines.append(row.replace("{x}", A).replace("{y}", B))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_each_task_reads_its_exact_glue_layout_with_quote_characters_kept(tmp_path, name):
    task = glue.TASKS[name]
    folder = tmp_path / task.folder
    folder.mkdir()
    for file in ["train.tsv", *[f for _, f, _ in task.dev_files]]:
        _layout_file(folder / file, name, dev=file != "train.tsv")
    splits = glue.read(str(tmp_path), task)
    for split in splits.values():
        if name == "mnli":
            assert split.texts == [A, B] and split.pairs == [B, B]
        else:
            assert split.texts == [A, B] and split.pairs in (None, [B, A])
        assert split.raw_labels == LAYOUTS[name][2] and split.skipped_malformed == 0


def test_the_glue_score_states_what_it_counts_and_its_checked_sources():
    score = glue.glue_score({"mnli": {"accuracy": 0.8, "accuracy_mm": 0.6}})
    assert score["tasks"] == {"mnli": pytest.approx(0.7)}  # one task, not two columns
    assert set(score["left_out"]) == {"wnli"} and "WNLI" not in glue.ORDER
    assert "mosaicml/examples" in score["source"] and "leaderboard" in score["source"]
    assert "Devlin et al. 2019" in score["source"]
