"""Fine-tuning input that once gave a traceback, a wrong answer or a silent loss: signed and
look-alike integer labels, list-valued texts, non-UTF-8 files, CSV/TSV fields over Python
csv's default limit, ClassLabel splits, rows lacking the second text, a one-split save_to_disk
folder as --hf_dataset, dev read from the training data, and an unlabelled test split
(predicted, not scored). Reading only, well under a second each, but the last test (one
tiny fine-tune, ~4 s, on the TensorFlow pass only)."""

import json
import os

import pytest

from common.errors import UserError
from tests.trainer import finetune_data as fd
from tests.trainer import mlm_data
from trainer import families
from trainer.finetuning import finetune, jobs, packing
from trainer.tasks import datasets, glue

SINGLE = datasets.TaskSpec("classification", "sentence", None, "label")
PAIR = datasets.TaskSpec("classification", "sentence", "second", "label")


def _labels(tmp_path, labels) -> tuple:
    rows = [{"sentence": f"w{i}", "label": label} for i, label in enumerate(labels)]
    return datasets.label_names(datasets.read_split(fd.write(tmp_path / "t.csv", rows), SINGLE))


def test_integers_written_with_a_sign_sort_as_numbers(tmp_path):
    assert _labels(tmp_path, ["+1", "-1", "+1"]) == ("-1", "+1")  # class 1 (binary F1): +1
    assert _labels(tmp_path, ["+10", "-2", "0", "+3"]) == ("-2", "0", "+3", "+10")


@pytest.mark.parametrize("odd", ["²", "--1", "1_0", "١"])
def test_labels_that_only_look_like_integers_are_string_labels_sorted_as_text(tmp_path, odd):
    # str.isdigit() takes '²' and Arabic-Indic digits, int() refuses '²' and '--1': only
    # ASCII digits with one optional sign are integers (docs/finetuning.md).
    assert _labels(tmp_path, [odd, "2", "10"]) == tuple(sorted([odd, "2", "10"]))


@pytest.mark.parametrize("column", ["sentence", "second", "label"])
def test_a_list_in_a_text_or_label_column_is_refused_naming_the_column_and_row(tmp_path, column):
    rows = [{"sentence": "w1", "second": "w2", "label": "a"} for _ in range(3)]
    rows[1][column] = ["w3", "w4"]
    path = fd.write(tmp_path / "t.jsonl", rows)
    with pytest.raises(UserError, match=f"row 2: column '{column}' holds a list") as caught:
        datasets.label_names(datasets.read_split(path, PAIR))
    assert len(str(caught.value).splitlines()) == 1


@pytest.mark.parametrize(
    "name, data, line",
    [
        ("t.jsonl", b'{"sentence": "w1", "label": "a"}\n{"sentence": "w\xe9", "label": "b"}\n', 2),
        ("t.csv", b"sentence,label\nw1,a\nw2,b\nw\xe9,a\n", 4),
        ("t.tsv", b"\xef\xbb\xbfsentence\tlabel\nw\xff1\ta\n", 2),
    ],
)
def test_a_file_that_is_not_utf8_is_one_line_naming_the_byte_and_line(tmp_path, name, data, line):
    (tmp_path / name).write_bytes(data)
    offset = data.index(b"\xe9" if b"\xe9" in data else b"\xff")
    with pytest.raises(UserError) as caught:
        datasets.read_split(str(tmp_path / name), SINGLE)
    message = str(caught.value)
    assert f"is not UTF-8: byte {offset} (line {line})" in message and name in message
    assert len(message.splitlines()) == 1


def test_a_glue_file_that_is_not_utf8_is_one_line(tmp_path):
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2" / "train.tsv").write_bytes(b"sentence\tlabel\nw\xe9\t1\n")
    (tmp_path / "SST-2" / "dev.tsv").write_bytes(b"sentence\tlabel\nw1\t1\n")
    with pytest.raises(UserError, match=r"train.tsv is not UTF-8: byte 16 \(line 2\)"):
        glue.read(str(tmp_path), glue.TASKS["sst2"])


@pytest.mark.parametrize("name", ["t.csv", "t.tsv"])
def test_a_field_over_pythons_csv_limit_reads_whole_and_is_truncated_at_packing(tmp_path, name):
    from common import tokenizer_files

    long = " ".join(["w5"] * 50_000)  # 149,999 characters: over csv's 131,072
    rows = [{"sentence": long, "label": "a"}, {"sentence": "w6", "label": "b"}]
    split = datasets.read_split(fd.write(tmp_path / name, rows), SINGLE)
    assert split.texts == [long, "w6"]
    mlm_data.make_tokenizer(tmp_path / "tokenizer")
    tokenizer, info = tokenizer_files.load(str(tmp_path / "tokenizer"))
    packed = packing.Packer(tokenizer, info, families.get("roberta"), 16).pack(split.texts)
    assert packed.truncated == 1 and len(packed.rows[0]) == 16  # as JSONL's long texts


def test_glue_tsv_reads_a_field_over_pythons_csv_limit(tmp_path):
    long = " ".join(["w5"] * 50_000)
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2" / "train.tsv").write_text(f"sentence\tlabel\n{long}\t1\nw2\t0\n")
    (tmp_path / "SST-2" / "dev.tsv").write_text("sentence\tlabel\nw1\t1\n")
    assert glue.read(str(tmp_path), glue.TASKS["sst2"])["train"].texts[0] == long


def test_a_row_lacking_the_second_text_is_counted_as_lacking_a_field_not_as_empty(tmp_path):
    rows = [
        {"sentence": "w1", "second": "w2", "label": "a"},
        {"sentence": "w3", "label": "b"},  # no second text at all
        {"sentence": "w4", "second": None, "label": "b"},  # a JSON null: missing too
        {"sentence": "w5", "second": " ", "label": "a"},  # present but empty
        {"second": "w6", "label": "a"},  # no first text
    ]
    split = datasets.read_split(fd.write(tmp_path / "t.jsonl", rows), PAIR)
    assert split.texts == ["w1"] and split.skipped_empty == 1 and split.skipped_malformed == 3
    short = tmp_path / "t.csv"  # a CSV row that ends before the second text's field
    short.write_text("sentence,label,second\nw1,a,w2\nw3,b\n")
    split = datasets.read_split(str(short), PAIR)
    assert split.skipped_malformed == 1 and split.skipped_empty == 0


def _saved(tmp_path, splits: dict, name="saved", names=("neg", "pos", "neutral")) -> str:
    import datasets as hf

    features = hf.Features({"sentence": hf.Value("string"), "label": hf.ClassLabel(names=names)})
    folder = str(tmp_path / name)
    hf.DatasetDict(
        {
            split: hf.Dataset.from_dict(
                {"sentence": [f"w{i}" for i in range(len(labels))], "label": labels},
                features=features,
            )
            for split, labels in splits.items()
        }
    ).save_to_disk(folder)
    return folder


def _config(**flags) -> finetune.FinetuneFlags:
    return finetune.FinetuneFlags(model="m", output_dir="o", text_column="sentence", **flags)


@pytest.mark.parametrize(
    "train, dev, message",
    [
        ([0, 0, 0], [0, 0], "every row has the label 'neg'; a classification task needs"),
        ([0, -1, 1], [0, 1], "row 2 has no label .-1."),
        ([0, 1, 1], [0, 2], "row 2: label 'neutral' does not occur in the training split"),
    ],
)
def test_class_label_splits_get_the_label_checks_of_a_file(tmp_path, train, dev, message):
    folder = _saved(tmp_path, {"train": train, "validation": dev})
    with pytest.raises(UserError, match=message):
        jobs.read_task(_config(hf_dataset=folder))
    good = _saved(tmp_path, {"train": [0, 2, 1], "validation": dev}, "good")
    assert jobs.read_task(_config(hf_dataset=good))[1] == ("neg", "pos", "neutral")


def test_a_one_split_save_to_disk_folder_as_hf_dataset_is_one_line_of_ours(tmp_path):
    import datasets as hf

    folder = str(tmp_path / "one")
    hf.Dataset.from_dict({"sentence": ["w1", "w2"], "label": [0, 1]}).save_to_disk(folder)
    with pytest.raises(UserError, match="one split .a datasets.Dataset., not a DatasetDict"):
        jobs.read_task(_config(hf_dataset=folder))


def test_dev_read_from_the_training_data_is_warned_in_one_line(tmp_path, capsys):
    folder = _saved(tmp_path, {"train": [0, 1, 1], "validation": [0, 1]})
    jobs.read_task(_config(hf_dataset=folder, dev_split="train"))
    out = capsys.readouterr().out
    assert "warning: dev (split train) is the training data" in out
    train = fd.write(tmp_path / "t.jsonl", fd.examples(4, 0, False, False))
    jobs.read_task(_config(train=train, dev=train, test=os.path.join(tmp_path, ".", "t.jsonl")))
    out = capsys.readouterr().out
    assert f"warning: dev ({train}) is the training data" in out
    assert "warning: test (" in out and len(out.strip().splitlines()) == 2


def test_an_unlabelled_test_split_is_marked_not_refused(tmp_path):
    folder = _saved(tmp_path, {"train": [0, 1, 2], "validation": [0, 1], "test": [-1, -1]})
    splits, _, targets, _ = jobs.read_task(_config(hf_dataset=folder, test_split="test"))
    assert splits["test"].unlabelled and targets["test"] is None
    train = fd.write(
        tmp_path / "train.csv", [{"sentence": "w1", "label": "1"}, {"sentence": "w2", "label": "0"}]
    )
    for rows in (
        [{"sentence": "w3"}],
        [{"sentence": "w3", "label": "-1"}],
        [{"sentence": "w3", "label": ""}],
    ):
        test = fd.write(tmp_path / "test.csv", rows)
        splits, _, targets, _ = jobs.read_task(_config(train=train, dev=train, test=test))
        assert splits["test"].unlabelled and targets["test"] is None
    signed = fd.write(
        tmp_path / "s.csv", [{"sentence": "w1", "label": "-1"}, {"sentence": "w2", "label": "+1"}]
    )
    test = fd.write(tmp_path / "test.csv", [{"sentence": "w3", "label": "-1"}])
    splits, _, targets, _ = jobs.read_task(_config(train=signed, dev=signed, test=test))
    assert not splits["test"].unlabelled and list(targets["test"]) == [0]  # -1 is a class here
    with pytest.raises(UserError, match="has no column 'label'"):  # dev must be labelled
        jobs.read_task(_config(train=train, dev=fd.write(tmp_path / "d.csv", [{"sentence": "w"}])))


@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax", reason="no backend-specific code: TensorFlow pass"
)
def test_an_unlabelled_test_file_is_predicted_by_each_seed_and_not_scored(tmp_path, capsys):
    export = fd.export_preset(tmp_path, "roberta")
    train = fd.write(tmp_path / "train.jsonl", fd.examples(16, 0, False, False))
    dev = fd.write(tmp_path / "dev.jsonl", fd.examples(8, 1, False, False))
    test_rows = [{"sentence": r["sentence"]} for r in fd.examples(5, 2, False, False)]
    test = fd.write(tmp_path / "test.jsonl", test_rows)
    out = tmp_path / "out"
    args = ["--model", export, "--train", train, "--dev", dev, "--test", test, "--seeds", "1,2"]
    args += ["--text_column", "sentence", "--batch_size", "8", "--learning_rate", "1e-3"]
    assert finetune.main([*args, "--epochs", "1", "--output_dir", str(out)]) == 0
    found = json.loads((out / "results.json").read_text())
    assert "test" not in found["scores"]["summary"] and found["data"]["test"]["unlabelled"]
    for seed in (1, 2):
        record = found["scores"]["seeds"][seed - 1]
        assert (
            "test" not in record
            and record["test_predictions"] == f"predictions/test-seed-{seed}.jsonl"
        )
        lines = (out / record["test_predictions"]).read_text().splitlines()
        assert [json.loads(line)["row"] for line in lines] == [1, 2, 3, 4, 5]
        assert {json.loads(line)["prediction"] for line in lines} <= {"no", "yes"}
    printed = capsys.readouterr().out
    assert "test: 5 example(s) without labels: not scored; each seed's predictions in" in printed
