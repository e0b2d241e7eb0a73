"""benchmarks.man_task on its own tiny inputs (no manual pages read): the paragraphs a page
gives, the TF-IDF baseline's pieces, and the table of fine-tuning outputs."""

import json

import numpy as np

from benchmarks import man_task

PAGE = """LS(1)                      User Commands                      LS(1)

NAME
       ls - list directory contents

SYNOPSIS
       ls [OPTION]... [FILE]...

DESCRIPTION
       List  information  about  the FILEs (the current directory by default).
       Sort entries alphabetically if none of -cftuvSUX nor --sort is specified.

       -a, --all
              do not ignore entries starting with .

GNU coreutils 9.4                 April 2024                         LS(1)
"""


def test_paragraphs_skip_name_synopsis_header_and_short_ones():
    found = man_task.paragraphs(PAGE, min_chars=50, max_chars=600)
    assert found == [
        "List information about the FILEs (the current directory by default). Sort entries "
        "alphabetically if none of -cftuvSUX nor --sort is specified."
    ]
    assert man_task.paragraphs(PAGE, min_chars=50, max_chars=10) == ["List infor"]
    assert len(man_task.paragraphs(PAGE, min_chars=40, max_chars=600)) == 2  # -a, --all ...


def test_tfidf_rows_are_unit_length_and_logistic_regression_separates_a_toy_task():
    train = ["red apple fruit", "green apple fruit", "fast car engine", "red car engine"]
    x_train, x_other = man_task.tfidf_matrices(train, ["apple", "unseen words only"])
    np.testing.assert_allclose(np.linalg.norm(x_train, axis=1), 1.0)
    assert not x_other[1].any()  # no word of train: an empty row, not NaN
    weights = man_task.logistic_regression(x_train, np.array([0, 0, 1, 1]), 2, c=10.0)
    scores = np.hstack([x_train, np.ones((4, 1))]) @ weights
    assert list(scores.argmax(1)) == [0, 0, 1, 1]


def test_table_gathers_the_seeds_of_one_recipe_from_several_folders(tmp_path):
    def write(name, seeds, scratch=False):
        records = [
            {
                "seed": s,
                "test": {"accuracy": t},
                "dev": {"accuracy": t},
                "collapsed": False,
                "seconds": 10.0,
            }
            for s, t in seeds
        ]
        document = {
            "protocol": {"pooling": "mean", "learning_rate": 3e-3, "epochs": 10},
            "model": {"from_scratch": scratch},
            "scores": {"seeds": records},
        }
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(document))

    write("a-s1", [(1, 0.5)])
    write("a-s2_3", [(2, 0.4), (3, 0.6)])
    write("b", [(1, 0.1)], scratch=True)
    rows = man_task.table(man_task.TableFlags(runs=str(tmp_path)))
    # One row for the three seeds of both folders, per seed in seed order.
    expected = (
        "| pretrained | mean | 0.003 | 10 | 3 | 50.0 ± 10.0 | 50.0 ± 10.0 | 50.0, 40.0, 60.0 |"
    )
    assert rows[2] == expected + " 10 |"
    assert rows[3].startswith("| scratch | mean | 0.003 | 10 | 1 | 10.0 |")


def test_corpus_leaves_out_the_tasks_pages_and_paragraphs(tmp_path, monkeypatch):
    """Pages `build` read never reach the corpus, nor a paragraph any split holds (the same
    text under another page name), nor a page rendered twice."""
    pages = {f"/m/{p}{i}.1": p for p in ("a", "b", "c") for i in range(3)}
    monkeypatch.setattr(
        man_task,
        "package_pages",
        lambda: {p: sorted(k for k in pages if pages[k] == p) for p in "abc"},
    )
    held = "A paragraph that the task holds, long enough to be one."

    def render(path):
        body = f"       Words of {path} about its package.\n"
        if path.endswith("c2.1"):
            body += "\n       " + held + "\n"
        if path.endswith("c1.1"):
            return render("/m/c0.1")  # a second name of the same page
        return f"X(1)   head   X(1)\n\nDESCRIPTION\n{body}\nfoot\n"

    monkeypatch.setattr(man_task, "render", render)
    task = tmp_path / "task"
    task.mkdir()
    flags = {"labels": 1, "pages": 2, "max_chars": 600}
    (task / "task.json").write_text(json.dumps({"flags": flags}))
    for split in ("train", "dev", "test"):
        (task / f"{split}.jsonl").write_text(json.dumps({"text": held, "label": "a"}) + "\n")
    out = tmp_path / "corpus.jsonl"
    config = man_task.CorpusFlags(task=str(task), output=str(out), workers=2)
    counts = man_task.corpus(config)
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    sources = sorted(d["source"] for d in docs)
    chosen = man_task.task_pages(man_task.package_pages(), flags)
    assert len(chosen) == 2 and not chosen & set(sources)  # the task's two pages of a label
    assert ("/m/c0.1" in sources) != ("/m/c1.1" in sources)  # one page, two names: read once
    assert counts["empty or repeated pages"] == 1
    assert all(held not in d["text"] for d in docs) and counts["task paragraphs left out"] == 1
    assert counts["documents"] == len(docs) == 9 - 2 - 1
