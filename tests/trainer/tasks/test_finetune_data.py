"""Fine-tuning input: each file format, the families' packing, truncation counts, and every
kind of bad input as one `error:` line with exit status 2 (checked before a model is built).
"""

import json

import pytest

from common.errors import UserError
from tests.trainer import finetune_data as fd
from tests.trainer import mlm_data
from trainer import families
from trainer.finetuning import finetune, packing
from trainer.tasks import datasets

SINGLE = datasets.TaskSpec("classification", "sentence", None, "label")
PAIR = datasets.TaskSpec("classification", "sentence", "second", "label")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from common import tokenizer_files

    folder = tmp_path_factory.mktemp("tok") / "tokenizer"
    mlm_data.make_tokenizer(folder)
    return tokenizer_files.load(str(folder))


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return fd.export_preset(tmp_path_factory.mktemp("export"), "roberta")


@pytest.mark.parametrize("name", ["t.jsonl", "t.csv", "t.tsv"])
def test_each_format_reads_the_named_columns(tmp_path, name):
    rows = [
        {"sentence": 'he said "w3, w4"', "second": "w5", "label": "yes", "extra": "x"},
        {"sentence": "w6", "second": "w7 w8", "label": "no", "extra": "y"},
    ]
    split = datasets.read_split(fd.write(tmp_path / name, rows), PAIR)
    assert split.texts == ['he said "w3, w4"', "w6"] and split.pairs == ["w5", "w7 w8"]
    assert split.raw_labels == ["yes", "no"] and split.row_numbers == [1, 2]


def test_rows_with_an_empty_text_are_skipped_and_counted(tmp_path):
    rows = [
        {"sentence": "w1", "label": "a"},
        {"sentence": "  ", "label": "b"},
        {"label": "b"},  # no text at all: lacking a field, counted apart
        {"sentence": "w2", "label": "b"},
    ]
    split = datasets.read_split(fd.write(tmp_path / "t.jsonl", rows), SINGLE)
    assert split.texts == ["w1", "w2"] and split.skipped_empty == 1
    assert split.skipped_malformed == 1
    assert split.row_numbers == [1, 4]


def test_labels_are_named_by_train_in_sorted_order_and_regression_reads_numbers(tmp_path):
    split = datasets.read_split(
        fd.write(
            tmp_path / "t.csv",
            [{"sentence": "w1", "label": "pos"}, {"sentence": "w2", "label": "neg"}],
        ),
        SINGLE,
    )
    names = datasets.label_names(split)
    assert names == ("neg", "pos")
    assert list(datasets.encode_labels(split, SINGLE, names)) == [1, 0]
    numbers = datasets.read_split(
        fd.write(
            tmp_path / "r.csv",
            [{"sentence": "w1", "label": "0.5"}, {"sentence": "w2", "label": "-2"}],
        ),
        SINGLE,
    )
    regression = datasets.TaskSpec("regression", "sentence", None, "label")
    assert list(datasets.encode_labels(numbers, regression, None)) == [0.5, -2.0]


def test_roberta_packs_a_pair_as_s_a_sep_sep_b_sep_without_segments(tokenizer):
    tok, info = tokenizer
    packed = packing.Packer(tok, info, families.get("roberta"), 16).pack(["w0 w1"], ["w2"])
    cls, sep = info.special_token_ids["cls_token"], info.special_token_ids["sep_token"]
    assert packed.rows == [[cls, 5, 6, sep, sep, 7, sep]]
    features = packed.features(10, info.pad_id, with_segments=False)
    assert set(features) == {"token_ids", "padding_mask"}
    assert list(features["token_ids"][0]) == [cls, 5, 6, sep, sep, 7, sep, 0, 0, 0]
    assert list(features["padding_mask"][0]) == [1] * 7 + [0] * 3


def test_bert_packs_a_pair_with_segment_ids_after_the_first_separator(tokenizer):
    tok, info = tokenizer
    bert = families.get("bert")
    packed = packing.Packer(tok, info, bert, 16).pack(["w0 w1"], ["w2 w3"])
    cls, sep = info.special_token_ids["cls_token"], info.special_token_ids["sep_token"]
    assert packed.rows == [[cls, 5, 6, sep, 7, 8, sep]]
    assert packed.segments == [[0, 0, 0, 0, 1, 1, 1]]
    single = packing.Packer(tok, info, bert, 16).pack(["w4"])
    assert single.rows == [[cls, 9, sep]] and single.segments == [[0, 0, 0]]


def test_over_long_texts_are_cut_longest_first_and_counted(tokenizer):
    tok, info = tokenizer
    packer = packing.Packer(tok, info, families.get("bert"), 8)  # 5 tokens of text in a pair
    long_first = " ".join(f"w{i}" for i in range(10))
    packed = packer.pack([long_first, "w1"], ["w2 w3", "w4"])
    assert packed.truncated == 1
    assert [len(row) for row in packed.rows] == [8, 5]
    assert packed.rows[0][1:4] == [5, 6, 7]  # the first text keeps its start
    assert packing.truncate_pair([1, 2, 3], [4, 5, 6, 7], 4) == ([1, 2], [4, 5])


def _run(export, tmp_path, capsys, train_rows, dev_rows, *extra, name="t.csv"):
    train = fd.write(tmp_path / f"train-{name}", train_rows)
    dev = fd.write(tmp_path / f"dev-{name}", dev_rows)
    try:
        code = finetune.main(
            [
                "--model",
                export,
                "--train",
                train,
                "--dev",
                dev,
                "--text_column",
                "sentence",
                "--output_dir",
                str(tmp_path / "out"),
                *extra,
            ]
        )
    except SystemExit as exit_:  # a usage error (the flags' own checks)
        code = exit_.code
    err = capsys.readouterr().err.strip()
    return code, err


GOOD = [
    {"sentence": "w1 w2", "second": "w3", "label": "a"},
    {"sentence": "w4", "second": "w5", "label": "b"},
]


@pytest.mark.parametrize(
    "dev_rows, extra, message",
    [
        (GOOD, ["--label_column", "gold"], "has no column 'gold' (--label_column)"),
        (
            [{"sentence": "w1", "label": "a"}],
            ["--text_pair_column", "second"],
            "has no column 'second' (--text_pair_column) (a text-pair task needs both",
        ),
        ([{"sentence": "w1", "label": "c"}], [], "label 'c' does not occur in the training file"),
        (
            [{"sentence": "w1", "label": "high"}],
            ["--task_type", "regression"],
            "regression label 'a' is not a finite number",
        ),
        (GOOD, ["--metric", "pearson"], "--metric pearson does not score a classification"),
        (GOOD, ["--seeds", "1,x"], "--seeds must be comma-separated integers"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(export, tmp_path, capsys, dev_rows, extra, message):
    code, err = _run(export, tmp_path, capsys, GOOD, dev_rows, *extra)
    assert code == 2 and err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert message in err
    assert not (tmp_path / "out" / "results.json").exists()


def test_an_export_of_another_family_is_refused_in_one_line(export, tmp_path, capsys):
    other = tmp_path / "deberta"
    other.mkdir()
    (other / "config.json").write_text(
        json.dumps({"registered_name": "keras_hub>DebertaV3Backbone", "config": {}})
    )
    (other / "task.json").write_text("{}")
    code, err = _run(str(other), tmp_path, capsys, GOOD, GOOD)
    # The families named are the registry's, ModernBERT with the others.
    assert code == 2 and "is not a keras-hub masked LM preset" in err
    assert all(name in err for name in families.NAMES), err
    assert len(err.splitlines()) == 1


def test_max_length_beyond_the_model_is_refused(export, tmp_path, capsys):
    code, err = _run(export, tmp_path, capsys, GOOD, GOOD, "--max_length", "64")
    assert code == 2 and "more than the model's 32 positions" in err


def test_a_file_whose_texts_are_all_empty_is_refused(export, tmp_path, capsys):
    code, err = _run(export, tmp_path, capsys, GOOD, [{"sentence": "", "label": "a"}])
    assert code == 2 and "every one of its 1 rows has an empty text" in err


def test_a_hugging_face_save_to_disk_folder_reads_like_a_file_with_class_names(tmp_path):
    import datasets as hf_datasets

    features = hf_datasets.Features(
        {
            "sentence": hf_datasets.Value("string"),
            "label": hf_datasets.ClassLabel(names=["neg", "pos"]),
        }
    )
    saved = hf_datasets.DatasetDict(
        {
            "train": hf_datasets.Dataset.from_dict(
                {"sentence": ["w1 w2", "", "w3"], "label": [1, 0, 0]}, features=features
            )
        }
    )
    saved.save_to_disk(str(tmp_path / "glue"))
    split = datasets.read_split(str(tmp_path / "glue" / "train"), SINGLE)
    assert split.texts == ["w1 w2", "w3"] and split.raw_labels == ["pos", "neg"]
    assert split.skipped_empty == 1
    with pytest.raises(UserError, match="holds several splits .train.: name one"):
        datasets.read_split(str(tmp_path / "glue"), SINGLE)


def test_integer_labels_sort_as_numbers(tmp_path):
    rows = [{"sentence": f"w{i}", "label": str(label)} for i, label in enumerate([10, 2, 1])]
    split = datasets.read_split(fd.write(tmp_path / "t.csv", rows), SINGLE)
    assert datasets.label_names(split) == ("1", "2", "10")
