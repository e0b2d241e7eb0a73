"""benchmarks/retrieval_task.py on corpora it writes itself (no real docstrings or manual pages
read): the files parse as pair and BEIR files, a rerun writes the same bytes, repeated texts
are kept once or left out, and a document's side (training or held out) is its text's."""

import json
import os

import pytest

from benchmarks import man_task, retrieval_task
from trainer.tasks import pairs
from trainer.tasks.retrieval import beir


def docstring(i: int) -> str:
    return (
        f"Compute the frobnication number {i} of a widget set.\n\n"
        f"The widget set {i} is walked once, each widget weighed by its colour {i * 7} and "
        f"its shape {i * 13}; the result is cached for the next call of number {i}."
    )


def write_corpus(path, count=120, extra=(), order=1):
    rows = [{"text": docstring(i), "source": f"pkg/m{i % 9}.py"} for i in range(count)]
    rows += [{"text": text, "source": "pkg/extra.py"} for text in extra]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[::order]), encoding="utf-8")
    return path


def build(tmp_path, corpus, name="task", *extra):
    out = tmp_path / name
    argv = ["docstrings", "--corpus", str(corpus), "--output_dir", str(out)]
    argv += ["--max_train", "60", "--max_queries", "10", "--max_corpus", "50", *extra]
    assert retrieval_task.main(argv) == 0
    return out


def files(folder) -> dict:
    return {
        os.path.relpath(os.path.join(root, name), folder): open(
            os.path.join(root, name), "rb"
        ).read()
        for root, _, names in os.walk(folder)
        for name in names
    }


def test_the_summary_is_the_first_sentence_and_the_rest_the_document():
    assert retrieval_task.summary_split("Do one thing. Then more.\nAnd so on.\n\nMore.") == (
        "Do one thing.",
        "Then more. And so on.\n\nMore.",
    )
    assert retrieval_task.summary_split("A first line without end\n\nBody.") == (
        "A first line without end",
        "Body.",
    )
    assert retrieval_task.summary_split("Do it.\n:param x: the x\n:return: y") == (
        "Do it.",
        ":param x: the x\n:return: y",
    )
    assert retrieval_task.summary_split("frob(a, b=1) -> int\n\nFrobs.") is None
    assert retrieval_task.summary_split("two lines\nwithout an end\n\nBody.") is None


def test_the_output_parses_and_a_rerun_writes_the_same_bytes(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    first, second = build(tmp_path, corpus, "a"), build(tmp_path, corpus, "b")
    assert files(first) == files(second)
    train = pairs.read(str(first / "train.jsonl"))
    assert train.hard_negatives == 0 and 0 < len(train) <= 60
    task = json.loads((first / "task.json").read_text())
    assert task["train_pairs"] == len(train) and "output_dir" not in task["flags"]
    held = set()
    for split in ("dev", "test"):
        data = beir.read(str(first / "beir"), split)
        assert 0 < len(data.queries) <= 10 == task["flags"]["max_queries"]
        assert len(data.queries) == task[f"{split}_queries"]
        for query_id, judged in data.qrels.items():
            (doc_id,) = judged
            number = data.queries[query_id].split()[4]  # the query's own number
            assert f"widget set {number} is" in data.corpus[doc_id]
            held.add(data.corpus[doc_id])
    assert len(data.corpus) == task["corpus_documents"] <= 50
    assert not held & set(train.positives)  # no judged document is a training one
    assert not {q.split()[4] for q in train.queries} & {d.split()[3] for d in held}


def test_repeated_documents_count_once_and_a_repeated_query_is_left_out(tmp_path):
    same_doc = docstring(1).replace("Compute the frobnication", "Work out the frobnication")
    twice = "Count the blue widgets of a set.\n\n" + "A body long enough to be a document. " * 4
    other = "Count the blue widgets of a set.\n\n" + "Another body, long enough as well. " * 4
    generic = "Initialize self.  See help(type(self)) for accurate signature.\n\n" + "x " * 80
    corpus = write_corpus(tmp_path / "corpus.jsonl", extra=(same_doc, twice, other, generic))
    out = build(tmp_path, corpus, "task", "--max_train", "1000", "--max_queries", "1000")
    task = json.loads((out / "task.json").read_text())
    assert task["repeated documents"] == 1 and task["ambiguous queries (pairs left out)"] == 2
    queries = [json.loads(line)["text"] for line in (out / "beir/queries.jsonl").open()]
    queries += list(pairs.read(str(out / "train.jsonl")).queries)
    assert len(queries) == 120 == len(set(queries))  # each document once, its first query
    assert not any("blue widgets" in q or "Initialize" in q for q in queries)


def test_a_documents_side_is_its_texts_whatever_else_the_corpus_holds(tmp_path):
    whole = build(tmp_path, write_corpus(tmp_path / "all.jsonl", 120), "whole")
    part = build(tmp_path, write_corpus(tmp_path / "part.jsonl", 60, order=-1), "part")

    def sides(folder):
        train = set(pairs.read(str(folder / "train.jsonl")).positives)
        held = {
            doc
            for split in ("dev", "test")
            for doc in beir.read(str(folder / "beir"), split).corpus.values()
            if doc not in train
        }
        return train, held

    (train_a, held_a), (train_b, held_b) = sides(whole), sides(part)
    assert held_b and held_b <= held_a  # every held-out document of the part, held out in all
    assert not train_a & held_b and not held_a & train_b


def test_a_missing_or_bad_corpus_is_one_line(tmp_path, capsys):
    argv = ["docstrings", "--corpus", str(tmp_path / "none.jsonl"), "--output_dir", "o"]
    assert retrieval_task.main(argv) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x"}\n')
    assert retrieval_task.main(["docstrings", "--corpus", str(bad), "--output_dir", "o"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "does not exist" in lines[0] and "line 1" in lines[1]


PAGE = """{upper}(1)              User Commands              {upper}(1)

NAME
       {name} - {description}

SYNOPSIS
       {name} [OPTION]...

DESCRIPTION
       The {name} program handles the {i}th kind of widget, one file at a time, and
       reports each widget it meets on standard output.

       -a, --all
              do not ignore entries starting with .

GNU tools 1.0                 April 2024                    {upper}(1)
"""


def fake_man(tmp_path, monkeypatch, count: int):
    folder = tmp_path / "man" / "man1"
    folder.mkdir(parents=True)
    for i in range(count):
        description = f"handle widgets of kind {i} quickly"
        if i % 10 == 3:
            description = f"the tool{i} widget handler for kind {i}"  # names the page
        (folder / f"tool{i}.1").write_text(
            PAGE.format(upper=f"TOOL{i}", name=f"tool{i}", description=description, i=i)
        )
    monkeypatch.setattr(man_task, "render", lambda path: open(path).read())
    return tmp_path / "man"


def test_manpages_query_the_name_line_without_the_name(tmp_path, monkeypatch):
    man = fake_man(tmp_path, monkeypatch, 80)
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        argv = ["manpages", "--man_dir", str(man), "--output_dir", str(out), "--min_pages", "10"]
        argv += ["--max_train", "20", "--max_queries", "3", "--workers", "2"]
        assert retrieval_task.main(argv) == 0
        outs.append(out)
    assert files(outs[0]) == files(outs[1])
    train = pairs.read(str(outs[0] / "train.jsonl"))
    assert len(train) == 20 and all(q.startswith("handle widgets") for q in train.queries)
    assert train.positives[0].startswith("The tool")
    dev = beir.read(str(outs[0] / "beir"), "dev")
    assert len(dev.queries) == 3 and not any("tool" in q for q in dev.queries.values())
    task = json.loads((outs[0] / "task.json").read_text())
    assert task["pages_read"] < 80  # stopped once the caps were filled


def test_a_word_hyphenated_at_a_lines_end_is_joined_and_excluded_pages_are_not_read(tmp_path):
    page = (
        "X(1)  head\nNAME\n       x - the li\u2010\n       brary of Long\u2010\n       Term\nfoot\n"
    )
    assert retrieval_task.sections(page) == {"NAME": ["x - the library of Long\u2010Term"]}
    (tmp_path / "man1").mkdir()
    for name in ("gcloud_a.1", "gcloud.1", "ls.1", "ls-link.1"):
        (tmp_path / "man1" / name).write_text("x")
    (tmp_path / "man1" / "ls-link.1").unlink()
    (tmp_path / "man1" / "ls-link.1").symlink_to(tmp_path / "man1" / "ls.1")
    names = [os.path.basename(p) for p in retrieval_task.man_pages(str(tmp_path), "gcloud")]
    assert names == ["ls.1"]


def test_too_few_manual_pages_is_one_line(tmp_path, monkeypatch, capsys):
    man = fake_man(tmp_path, monkeypatch, 5)
    assert retrieval_task.main(["manpages", "--man_dir", str(man), "--output_dir", "o"]) == 2
    assert "docstrings sub-command" in capsys.readouterr().err


@pytest.mark.parametrize("flag_value", [("--heldout_share", "1.5"), ("--max_chars", "10")])
def test_out_of_bounds_flags_are_refused(tmp_path, flag_value):
    corpus = write_corpus(tmp_path / "c.jsonl")
    argv = ["docstrings", "--corpus", str(corpus), "--output_dir", "o", *flag_value]
    with pytest.raises(SystemExit) as exit_:
        retrieval_task.main(argv)
    assert exit_.value.code == 2
