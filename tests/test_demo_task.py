"""`make demo`'s downstream task (benchmarks/demo_task.py): which package a docstring of the
demo corpus came from. The files are the same every time, the labels are the packages and
balanced, no text is in both train and dev, and the report puts both fine-tunes on one line."""

import json

import pytest

from benchmarks import demo_task

# Sources as beam_pipelines.demo_corpus records them: relative to the standard library, where
# a venv's packages sit under some site-packages folder further away.
SOURCES = {
    "stdlib": "json/decoder.py",
    "numpy": "site-packages/numpy/linalg/_linalg.py",
    "pip": "../../../work/.venv/lib/python3.11/site-packages/pip/_internal/req.py",
    "six": "dist-packages/six.py",
    "rare": "site-packages/rare/x.py",
}
SIZES = {"stdlib": 40, "numpy": 25, "pip": 30, "six": 20, "rare": 3}


def write_corpus(path, order=1):
    rows = [
        {"text": f"{label} docstring number {i}. " * 3, "source": SOURCES[label]}
        for label, size in SIZES.items()
        for i in range(size)
    ]
    rows.append(dict(rows[0]))  # a repeated text counts once
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[::order]), encoding="utf-8")
    return path


def build(tmp_path, corpus, name="task", *extra):
    out = tmp_path / name
    assert (
        demo_task.main(
            [
                "build",
                "--corpus",
                str(corpus),
                "--output_dir",
                str(out),
                "--min_per_label",
                "10",
                *extra,
            ]
        )
        == 0
    )
    return [
        [json.loads(line) for line in (out / f"{split}.jsonl").read_text().splitlines()]
        for split in ("train", "dev")
    ]


def test_package_of_reads_the_folder_after_site_packages():
    assert {label: demo_task.package_of(s) for label, s in SOURCES.items()} == {
        label: label for label in SOURCES
    }


def test_task_is_balanced_named_and_disjoint(tmp_path):
    train, dev = build(
        tmp_path,
        write_corpus(tmp_path / "corpus.jsonl"),
        "task",
        "--labels",
        "3",
        "--per_label",
        "22",
    )
    rows = train + dev
    # The 3 packages with most documents; each gives the same number (22, or the smallest
    # label's count when fewer); "six" (4th) and "rare" (under --min_per_label) are out.
    counts = {label: sum(r["label"] == label for r in rows) for label in SIZES}
    assert counts == {"stdlib": 22, "numpy": 22, "pip": 22, "six": 0, "rare": 0}
    assert not {r["text"] for r in train} & {r["text"] for r in dev}
    assert len({r["text"] for r in rows}) == len(rows)
    assert 0.05 < len(dev) / len(rows) < 0.4 and {r["label"] for r in dev} == {
        "stdlib",
        "numpy",
        "pip",
    }


def test_task_files_do_not_depend_on_corpus_order(tmp_path):
    first = build(tmp_path, write_corpus(tmp_path / "a.jsonl"), "a", "--max_chars", "30")
    again = build(tmp_path, write_corpus(tmp_path / "a.jsonl"), "b", "--max_chars", "30")
    reversed_ = build(
        tmp_path, write_corpus(tmp_path / "r.jsonl", order=-1), "c", "--max_chars", "30"
    )
    assert (tmp_path / "a" / "train.jsonl").read_bytes() == (
        tmp_path / "b" / "train.jsonl"
    ).read_bytes()
    assert first == again
    # The duplicate text is the first row, or the last reversed: the same task either way.
    assert first == reversed_
    assert max(len(r["text"]) for r in first[0]) == 30


def test_too_small_a_corpus_is_one_line(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    code = demo_task.main(
        [
            "build",
            "--corpus",
            str(corpus),
            "--output_dir",
            str(tmp_path / "t"),
            "--min_per_label",
            "35",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err
    assert not (tmp_path / "t").exists()


def results(metric, scores, masked=None, baseline=None, collapsed=(), examples=100):
    return {
        "scores": {
            "metric": metric,
            "seeds": [{}] * len(scores),
            "summary": {
                "dev": {metric: {"mean": sum(scores) / len(scores), "std": 0.01}},
                "collapsed_seeds": list(collapsed),
            },
        },
        "pretraining": {"masked_accuracy": masked, "unigram_baseline": baseline},
        "task": {"labels": ["a", "b", "c"]},
        "data": {"train": {"examples": examples}},
    }


def _report(tmp_path, documents: dict, *extra) -> int:
    for name, document in documents.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(document))
    return demo_task.main(["report", "--finetune_dir", str(tmp_path), *extra])


def test_report_puts_both_models_side_by_side_at_each_label_budget(tmp_path, capsys):
    documents = {
        "pretrained-few": results("macro_f1", [0.6, 0.7], 0.3, 0.03, examples=48),
        "pretrained-all": results("macro_f1", [0.8, 0.7], 0.3, 0.03, examples=1200),
        "scratch-few": results("macro_f1", [0.2, 0.3], examples=48),
        "scratch-all": results("macro_f1", [0.5, 0.6], collapsed=[2], examples=1200),
    }
    out = tmp_path / "lines.txt"
    assert _report(tmp_path, documents, "--output", str(out)) == 0
    printed = capsys.readouterr().out
    assert printed == out.read_text()
    assert printed.splitlines() == [
        "downstream (3-label package task, dev macro_f1; the model's masked accuracy 30.0 %, "
        "10.0x the unigram baseline):",
        "  48 labelled documents: pretrained 0.650 ± 0.010 (2 seeds) vs random weights "
        "0.250 ± 0.010 (2 seeds): +0.400",
        "  1,200 labelled documents: pretrained 0.750 ± 0.010 (2 seeds) vs random weights "
        "0.550 ± 0.010 (2 seeds, 1 collapsed): +0.200",
        "  pretrained with 48 labels (0.650) scores at least what random weights score with "
        "1,200 (0.550): pretraining saved 96 % of the labels",
    ]


def test_report_says_when_no_labels_were_saved(tmp_path, capsys):
    documents = {
        "pretrained-few": results("accuracy", [0.4], examples=48),
        "pretrained-all": results("accuracy", [0.8], examples=1200),
        "scratch-few": results("accuracy", [0.3], examples=48),
        "scratch-all": results("accuracy", [0.7], examples=1200),
    }
    assert _report(tmp_path, documents) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert "random weights with 1,200 labels (0.700) score above the pretrained model" in last


def test_build_writes_a_small_label_budget_from_train(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    train, _ = build(tmp_path, corpus, "task", "--labels", "3", "--budget", "4")
    rows = [
        json.loads(line) for line in (tmp_path / "task" / "train-4.jsonl").read_text().splitlines()
    ]
    assert {r["label"]: sum(x["label"] == r["label"] for x in rows) for r in rows} == {
        "stdlib": 4,
        "numpy": 4,
        "pip": 4,
    }
    assert all(r in train for r in rows) and rows == [r for r in train if r in rows]


def test_report_refuses_swapped_folders(tmp_path, capsys):
    documents = {
        name: dict(results("accuracy", [0.5]), model={"from_scratch": from_scratch})
        for name, from_scratch in (("pretrained-all", True), ("scratch-all", False))
    }
    assert _report(tmp_path, documents, "--budgets", "all") == 2
    err = capsys.readouterr().err.strip()
    assert "swapped" in err and "\n" not in err


@pytest.mark.parametrize("missing", ["pretrained-few", "scratch-all"])
def test_report_without_a_fine_tune_is_one_line(tmp_path, capsys, missing):
    names = {"pretrained-few", "scratch-few", "pretrained-all", "scratch-all"} - {missing}
    assert _report(tmp_path, {name: results("accuracy", [0.5]) for name in names}) == 2
    err = capsys.readouterr().err.strip()
    assert f"{missing}/results.json does not exist" in err and "\n" not in err
