"""A tiny fake GLUE download: GLUE's real folder and file names, header rows and columns
(CoLA without a header, MRPC's byte-order mark, MNLI's two dev files and annotator columns,
one QQP row lacking its fields), a few rows per task over the test vocabulary w0..w94.
GLUE's own data cannot ship (mixed licences, QQP non-commercial)."""

from __future__ import annotations

import numpy as np

HEADERS = {
    "SST-2": ["sentence", "label"],
    "MRPC": ["\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
    "QQP": ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
    "STS-B": [
        "index",
        "genre",
        "filename",
        "year",
        "old_index",
        "source1",
        "source2",
        "sentence1",
        "sentence2",
        "score",
    ],
    "MNLI": [
        "index",
        "promptID",
        "pairID",
        "genre",
        "sentence1_binary_parse",
        "sentence2_binary_parse",
        "sentence1_parse",
        "sentence2_parse",
        "sentence1",
        "sentence2",
        "label1",
        "gold_label",
    ],
    "QNLI": ["index", "question", "sentence", "label"],
    "RTE": ["index", "sentence1", "sentence2", "label"],
}
NLI = ("contradiction", "entailment", "neutral")
ENTAIL = ("entailment", "not_entailment")


def _words(rng, count: int) -> str:
    return " ".join(f"w{int(i)}" for i in rng.integers(10, 95, count))


def _row(folder: str, index: int, rng, dev_annotators: bool) -> list[str]:
    """One row of `folder`'s TSV; its label follows its first text (w0 = class 1, w1 = 0)."""
    label = index % 2
    first = _words(rng, 4) + (" w0" if label else " w1")
    second = _words(rng, 3)
    if folder == "CoLA":
        return ["gj04", str(label), "*" if not label else "", first]
    if folder == "SST-2":
        return [first, str(label)]
    if folder == "MRPC":
        return [str(label), "101", "102", first, second]
    if folder == "QQP":
        return [str(index), "1", "2", first, second, str(label)]
    if folder == "STS-B":
        return [
            str(index),
            "main-news",
            "x",
            "2012",
            "0",
            "none",
            "none",
            first,
            second,
            f"{1.0 + 3.0 * label + rng.uniform(0, 1):.3f}",
        ]
    if folder == "MNLI":
        gold = NLI[index % 3]
        annotators = [gold] * (5 if dev_annotators else 1)
        return [
            str(index),
            "1",
            "1n",
            "fiction",
            "(a)",
            "(b)",
            "(ROOT a)",
            "(ROOT b)",
            first,
            second,
            *annotators,
            gold,
        ]
    name = ENTAIL[1 - label]
    return [str(index), first, second, name]


def _header(folder: str, dev_annotators: bool) -> list[str] | None:
    if folder == "CoLA":
        return None
    header = list(HEADERS[folder])
    if folder == "MNLI" and dev_annotators:
        header[-2:-1] = [f"label{i}" for i in range(1, 6)]
    return header


def write_tsv(path, folder: str, rows: int, seed: int, dev: bool = False) -> None:
    rng = np.random.default_rng(seed)
    lines = [_row(folder, i, rng, dev) for i in range(rows)]
    header = _header(folder, dev)
    if folder == "QQP":
        lines.append(["99", "5", "6", "w3 w4 only the first question"])  # a broken row
    text = "".join("\t".join(line) + "\n" for line in ([header] if header else []) + lines)
    path.write_text(text, encoding="utf-8")


FOLDERS = ("CoLA", "SST-2", "MRPC", "QQP", "STS-B", "MNLI", "QNLI", "RTE")


def fake_glue(root, train_rows: int = 12, dev_rows: int = 6):
    """GLUE's download layout under `root`; returns root."""
    for folder in FOLDERS:
        (root / folder).mkdir(parents=True)
        write_tsv(root / folder / "train.tsv", folder, train_rows, 0)
        devs = ("dev_matched.tsv", "dev_mismatched.tsv") if folder == "MNLI" else ("dev.tsv",)
        for number, name in enumerate(devs, start=1):
            write_tsv(root / folder / name, folder, dev_rows, number, dev=True)
    return root
