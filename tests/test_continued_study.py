"""The evidence script (benchmarks/continued_study.py): the manual-page corpus and its
section task never leak the label through the page header, keep a page on one side of the
split and balance the sections; the report reads each run's last evaluation and refuses
swapped folders. No training here: run folders are written as trainer.task leaves them."""

import json
import shutil

import pytest

from benchmarks import continued_study

# A page as `man` prints it: the header and footer lines name the section.
PAGE = """LS(1)                      User Commands                      LS(1)

NAME
       ls - list directory contents

DESCRIPTION
       List  information  about  the FILEs (the current directory by default).
       Sort entries alphabetically if none of the options is given.

GNU coreutils 9.4                 April 2024                        LS(1)
"""


def test_paragraphs_drop_the_header_and_footer_that_name_the_section():
    paras = continued_study.paragraphs(PAGE)
    assert paras == [
        "NAME ls - list directory contents",
        "DESCRIPTION List information about "
        "the FILEs (the current directory by default). Sort entries "
        "alphabetically if none of the options is given.",
    ]
    assert not any("User Commands" in p or "LS(1)" in p for p in paras)
    assert continued_study.paragraphs("only\n\ntwo lines\n") == []


def fake_man(root, pages_per_section):
    for section, count in pages_per_section.items():
        folder = root / f"man{section}"
        folder.mkdir(parents=True)
        for i in range(count):
            (folder / f"page{i}.{section}.gz").write_text(f"{section}:{i}")
        (folder / "alias.1.gz").symlink_to(folder / f"page0.{section}.gz")  # a link: skipped


def fake_render(path):
    section, i = open(path).read().split(":")
    body = "\n\n".join(
        f"Section {section} page {i} paragraph {k} " + "words " * 30 for k in range(4)
    )
    return f"HEADER({section})\n\n{body}\n\nFOOTER({section})\n"


def test_task_keeps_each_page_on_one_side_and_balances_sections(tmp_path):
    fake_man(tmp_path / "man", {"1": 30, "5": 12})
    config = continued_study.CorpusFlags(
        output_dir=str(tmp_path / "out"),
        sections="1,5",
        per_section=20,
        per_page=2,
        per_label=1000,
        min_chars=50,
        max_chars=100,
        dev_share=0.3,
        man_root=str(tmp_path / "man"),
    )
    sizes = continued_study.build_corpus(config, render_page=fake_render)
    corpus = [json.loads(x) for x in (tmp_path / "out/corpus.jsonl").read_text().splitlines()]
    assert sizes["pages"] == len(corpus) == 20 + 12  # per_section caps man1; links skipped
    assert not any("HEADER" in d["text"] or "FOOTER" in d["text"] for d in corpus)
    train, dev = (
        [json.loads(x) for x in (tmp_path / f"out/task/{s}.jsonl").read_text().splitlines()]
        for s in ("train", "dev")
    )
    rows = train + dev
    # Balanced: man5's 12 pages x 2 paragraphs bound both sections.
    assert sum(r["label"] == "man1" for r in rows) == sum(r["label"] == "man5" for r in rows)
    assert sum(r["label"] == "man5" for r in rows) == 24 and train and dev
    assert all(len(r["text"]) <= 100 for r in rows)
    page = lambda row: row["text"].split(" paragraph")[0]  # noqa: E731
    assert not {page(r) for r in train} & {page(r) for r in dev}


def test_sentence_pairs_are_consecutive_sentences_of_readable_length():
    paragraph = (
        "The -a, --all option lists entries starting with a dot. Use it with care, e.g. in "
        "scripts. Short. The last sentence of this paragraph is long enough to be kept."
    )
    assert continued_study.sentence_pairs(paragraph, min_chars=20) == [
        (
            "The -a, --all option lists entries starting with a dot.",
            "Use it with care, e.g. in scripts.",
        )
    ]


def test_order_task_holds_the_same_words_either_way_balanced_and_split_by_page(tmp_path):
    fake_man(tmp_path / "man", {"1": 40})

    def render(path):
        i = open(path).read().split(":")[1]
        sentences = [
            f"Page {i} sentence {k} says something about option number {k}." for k in range(6)
        ]
        licence = "This is free software, see the licence. There is no warranty at all here."
        return f"HEADER\n\n{' '.join(sentences)}\n\n{licence}\n\nFOOTER\n"

    config = continued_study.CorpusFlags(
        output_dir=str(tmp_path / "out"),
        sections="1",
        per_section=40,
        min_chars=20,
        dev_share=0.3,
        man_root=str(tmp_path / "man"),
        order_per_page=3,
    )
    pages = {
        p: ("1", continued_study.paragraphs(render(p)))
        for p in continued_study.page_files(config.man_root, "1", 40)
    }
    train, dev = continued_study.order_task(pages, config)
    rows = train + dev
    assert len(rows) == 40 * 3 and train and dev
    assert not any("licence" in r["text"] + r["text_pair"] for r in rows)  # repeated: left out
    labels = [r["label"] for r in rows]
    assert 0.3 < labels.count("swapped") / len(rows) < 0.7  # about half, by a hash
    for row in rows:
        first, second = row["text"], row["text_pair"]
        if row["label"] == "swapped":
            first, second = second, first
        k = int(first.split("sentence ")[1].split(" ")[0])
        assert second.split("sentence ")[1].startswith(f"{k + 1} ")  # consecutive, in order
    page = lambda row: row["text"].split(" sentence")[0]  # noqa: E731
    assert not {page(r) for r in train} & {page(r) for r in dev}


def test_no_renderable_page_is_one_line(tmp_path, capsys):
    code = continued_study.main(
        ["corpus", "--output_dir", str(tmp_path / "out"), "--man_root", str(tmp_path / "none")]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err


@pytest.mark.skipif(shutil.which("man") is None, reason="needs man to render a page")
def test_a_real_roff_page_renders_without_its_section_header(tmp_path):
    roff = tmp_path / "demo.5"
    roff.write_text(
        '.TH DEMO 5 "2026" "demo" "File Formats Manual"\n.SH NAME\n'
        "demo \\- a test page\n.SH DESCRIPTION\nThe demo file holds settings.\n"
    )
    paras = continued_study.paragraphs(continued_study.render(str(roff)))
    assert any("The demo file holds settings." in p for p in paras)
    assert not any("File Formats Manual" in p for p in paras)


def write_run(folder, evals, init_from, learning_rate=0.003):
    folder.mkdir(parents=True)
    history = [
        {"step": step, "loss": 9.0, "eval_loss": loss, "eval_accuracy": acc}
        for step, loss, acc in evals
    ]
    (folder / "history.json").write_text(json.dumps(history))
    (folder / "run_config.json").write_text(
        json.dumps({"init_from": init_from, "learning_rate": learning_rate})
    )
    return str(folder)


def write_finetune(folder, mean, std, collapsed=()):
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(
        json.dumps(
            {
                "scores": {
                    "metric": "macro_f1",
                    "seeds": [{}, {}],
                    "summary": {
                        "dev": {"macro_f1": {"mean": mean, "std": std}},
                        "collapsed_seeds": collapsed,
                    },
                }
            }
        )
    )
    return str(folder)


def test_report_reads_each_runs_last_evaluation_and_refuses_swapped_folders(tmp_path):
    source = {"path": "demo/export/hf", "kind": "hf", "digest": "ab" * 32}
    zero = write_run(tmp_path / "zero", [(1, 4.396, 0.236)], source, 1e-9)
    cont = write_run(tmp_path / "cont", [(200, 4.5, 0.2), (400, 4.193, 0.255)], source, 1e-4)
    scratch = write_run(tmp_path / "scratch", [(400, 6.126, 0.044)], None)
    ft = [
        write_finetune(tmp_path / name, m, 0.01, c)
        for name, m, c in (("f0", 0.5, ()), ("f1", 0.6, ()), ("f2", 0.04, [1, 2]), ("fr", 0.3, ()))
    ]
    out = tmp_path / "table.md"
    assert (
        continued_study.main(
            [
                "report",
                "--zero",
                zero,
                "--continued",
                cont,
                "--scratch",
                scratch,
                "--ft_zero",
                ft[0],
                "--ft_continued",
                ft[1],
                "--ft_scratch",
                ft[2],
                "--ft_random",
                ft[3],
                "--output",
                str(out),
            ]
        )
        == 0
    )
    lines = out.read_text().splitlines()
    assert lines[0].endswith("| downstream dev macro_f1 (seeds) |")
    assert lines[2] == "| demo model, not continued | 0 | - | 4.396 | 23.6 % | 0.500 ± 0.010 (2) |"
    assert lines[3] == (
        "| demo model continued (`--init_from`) | 400 | 0.0001 | 4.193 | "
        "25.5 % | 0.600 ± 0.010 (2) |"
    )
    assert lines[4] == (
        "| from scratch | 400 | 0.003 | 6.126 | 4.4 % | 0.040 ± 0.010 (2, 2 collapsed) |"
    )
    assert lines[5].startswith("| random weights (no pretraining) | 0 | - | - | - | 0.300")
    code = continued_study.main(
        ["report", "--zero", zero, "--continued", scratch, "--scratch", cont]
    )
    assert code == 2
