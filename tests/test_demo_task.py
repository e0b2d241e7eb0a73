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


def results(metric, scores, masked=None, baseline=None, collapsed=()):
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
    }


def test_report_line_puts_both_models_side_by_side(tmp_path, capsys):
    for name, document in (
        ("pre", results("macro_f1", [0.8, 0.7], 0.3, 0.03)),
        ("scratch", results("macro_f1", [0.5, 0.6], collapsed=[2])),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(document))
    out = tmp_path / "line.txt"
    assert (
        demo_task.main(
            [
                "report",
                "--pretrained",
                str(tmp_path / "pre"),
                "--scratch",
                str(tmp_path / "scratch"),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    line = capsys.readouterr().out.strip()
    assert line == out.read_text().strip()
    assert line == (
        "downstream (3-label package task, dev macro_f1): pretrained 0.750 ± 0.010 "
        "(2 seeds) vs from scratch 0.550 ± 0.010 (2 seeds, 1 collapsed); masked "
        "accuracy 30.0 %, 10.0x the unigram baseline"
    )


def test_report_refuses_swapped_folders(tmp_path, capsys):
    for name, from_scratch in (("pre", True), ("scratch", False)):
        (tmp_path / name).mkdir()
        document = dict(results("accuracy", [0.5]), model={"from_scratch": from_scratch})
        (tmp_path / name / "results.json").write_text(json.dumps(document))
    code = demo_task.main(
        ["report", "--pretrained", str(tmp_path / "pre"), "--scratch", str(tmp_path / "scratch")]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "swapped" in err and "\n" not in err


@pytest.mark.parametrize("missing", ["pre", "scratch"])
def test_report_without_a_fine_tune_is_one_line(tmp_path, capsys, missing):
    for name in {"pre", "scratch"} - {missing}:
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(results("accuracy", [0.5])))
    code = demo_task.main(
        ["report", "--pretrained", str(tmp_path / "pre"), "--scratch", str(tmp_path / "scratch")]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "results.json does not exist" in err and "\n" not in err
