"""A labelled task of real text that no one on this project wrote and that no model here
pretrained on: which Debian package a paragraph of an English manual page belongs to.

    python -m benchmarks.man_task build --output_dir runs/man-task
    python -m benchmarks.man_task corpus --task runs/man-task --output runs/man-corpus.jsonl
    python -m benchmarks.man_task tfidf --task runs/man-task
    python -m benchmarks.man_task table --runs runs/grid-tiny   # trainer.finetune's outputs

`build` finds every English manual page (`/usr/share/man/man[1-8]/`) that dpkg lists as a
package's file (`/var/lib/dpkg/info/*.list`), renders it with `man` as
`benchmarks.system_texts` does, and cuts it into paragraphs of prose (a blank line ends one;
the page's header and footer, its NAME and SYNOPSIS sections and paragraphs under
`--min_chars` are left out). A page that renders to the text of another (a `.so` link) is
read once. The `--labels` packages with the most pages are the labels; `--pages` of each
(chosen by a hash of the path) are read. Pages, never paragraphs, are split between
train/dev/test by a second hash, so no page gives text to two splits; then each label keeps at
most `--train_per_label` / `--eval_per_label` paragraphs of each split (by a hash of the
text). The labels depend on what is installed; `task.json` records them and the counts.

`corpus` writes pretraining text of the task's domain without the task: every other English
manual page (up to `--max_pages`, chosen by a hash), one document each, minus the pages `build`
read and any paragraph a split holds (docs/finetuning.md, "Pretraining in the task's domain").

`tfidf` is the reference a classifier must beat: TF-IDF of words (sublinear tf, smooth idf,
l2 rows, as scikit-learn's defaults; written here with numpy, scikit-learn is not installed)
and multinomial logistic regression (L-BFGS from SciPy), its L2 strength chosen on dev.
`table` prints one markdown row per fine-tuning output folder (docs/finetuning.md).
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np

from common import flags
from common.errors import run_cli
from common.flags import flag

SKIPPED_SECTIONS = {"NAME", "SYNOPSIS"}


@dataclasses.dataclass
class BuildFlags:
    output_dir: str = flag("Where train/dev/test.jsonl and task.json go.", required=True)
    labels: int = flag("Packages (labels): those with the most manual pages.", 18, minimum=2)
    pages: int = flag("At most this many pages read per package.", 80, minimum=3)
    train_per_label: int = flag("At most this many training paragraphs per label.", 60)
    eval_per_label: int = flag("At most this many dev (and test) paragraphs per label.", 90)
    min_chars: int = flag("Shorter paragraphs are left out.", 120, minimum=1)
    max_chars: int = flag("Each paragraph is cut to this many characters.", 600, minimum=1)


@dataclasses.dataclass
class CorpusFlags:
    task: str = flag(
        "A folder written by `build`: its pages and paragraphs stay out.", required=True
    )
    output: str = flag("The pretraining corpus (JSONL: one page a document).", required=True)
    max_pages: int = flag("At most this many pages, chosen by a hash of the path.", 6000)
    workers: int = flag("`man` processes at a time.", 4, minimum=1)


@dataclasses.dataclass
class TfidfFlags:
    task: str = flag("A folder written by `build`.", required=True)
    max_chars: int = flag(
        "Read only this many characters of each text (about what a 64-position model reads: "
        "~180 with the demo's tokenizer); default all.",
        minimum=1,
    )


@dataclasses.dataclass
class TableFlags:
    runs: str = flag(
        "A folder of trainer.finetune output folders (each with results.json).", required=True
    )


def _hash(text: str, salt: str = "") -> int:
    return int.from_bytes(hashlib.blake2b((salt + text).encode(), digest_size=8).digest(), "big")


def package_pages() -> dict[str, list[str]]:
    """{package: its manual pages}, from dpkg's file lists (architecture suffix dropped)."""
    pages = collections.defaultdict(set)
    for listing in glob.glob("/var/lib/dpkg/info/*.list"):
        package = os.path.basename(listing)[: -len(".list")].split(":")[0]
        with open(listing, encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.strip()
                if re.match(r"/usr/share/man/man[1-8]/[^/]+$", path) and os.path.isfile(path):
                    pages[package].add(path)
    return {name: sorted(paths) for name, paths in pages.items()}


def render(path: str) -> str:
    env = dict(os.environ, MANWIDTH="100", LANG="C.UTF-8")
    out = subprocess.run(
        ["man", "-l", "-E", "UTF-8", path], capture_output=True, env=env, timeout=30, check=False
    ).stdout
    return out.decode("utf-8", "replace").replace("\b", "")


def paragraphs(page: str, min_chars: int, max_chars: int) -> list[str]:
    """Prose paragraphs of a rendered page: lines joined, outside NAME and SYNOPSIS."""
    lines = page.splitlines()[1:-1]  # the header and footer lines name the page
    found, current, section = [], [], ""
    for line in [*lines, ""]:
        if line and not line[0].isspace():  # a section heading
            section, current = line.strip(), []
            continue
        if line.strip():
            current.append(line.strip())
            continue
        text = " ".join(" ".join(current).split())  # justified lines: runs of spaces
        current = []
        if section not in SKIPPED_SECTIONS and len(text) >= min_chars:
            found.append(text[:max_chars])
    return found


def build(config: BuildFlags) -> dict:
    by_package = package_pages()
    labels = sorted(by_package, key=lambda p: (-len(by_package[p]), p))[: config.labels]
    rows, seen = {"train": [], "dev": [], "test": []}, set()
    for label in sorted(labels):
        chosen = sorted(by_package[label], key=_hash)[: config.pages]
        split_rows = collections.defaultdict(list)
        for path in chosen:
            page = render(path)
            key = hashlib.sha256(page.encode()).hexdigest()
            if not page.strip() or key in seen:
                continue
            seen.add(key)
            split = ("train", "dev", "test")[_hash(path, "split") % 3]
            split_rows[split] += paragraphs(page, config.min_chars, config.max_chars)
        for split, texts in split_rows.items():
            cap = config.train_per_label if split == "train" else config.eval_per_label
            for text in sorted(set(texts), key=_hash)[:cap]:
                rows[split].append({"text": text, "label": label})
    os.makedirs(config.output_dir, exist_ok=True)
    for split, items in rows.items():
        with open(os.path.join(config.output_dir, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            for item in sorted(items, key=lambda r: _hash(r["text"], "order")):
                f.write(json.dumps(item, ensure_ascii=False) + "\n")
    counts = {s: dict(collections.Counter(r["label"] for r in items)) for s, items in rows.items()}
    summary = {"labels": sorted(labels), "examples": {s: len(r) for s, r in rows.items()}}
    summary["per_label"] = counts
    with open(os.path.join(config.output_dir, "task.json"), "w") as f:
        json.dump({**summary, "flags": dataclasses.asdict(config)}, f, indent=1)
    return summary


def task_pages(by_package: dict, task_flags: dict) -> set[str]:
    """The pages `build` read for the task of these flags (its labels' hash-chosen pages)."""
    labels = sorted(by_package, key=lambda p: (-len(by_package[p]), p))[: task_flags["labels"]]
    return {
        path
        for label in labels
        for path in sorted(by_package[label], key=_hash)[: task_flags["pages"]]
    }


def corpus(config: CorpusFlags) -> dict:
    """Pretraining text of the task's domain without the task: every other English manual
    page (up to `max_pages`), one document each, without any paragraph a split holds (a page
    linked under another name renders the same text)."""
    from concurrent.futures import ThreadPoolExecutor

    with open(os.path.join(config.task, "task.json"), encoding="utf-8") as f:
        task_flags = json.load(f)["flags"]
    held = {
        t for split in ("train", "dev", "test") for t in _read(f"{config.task}/{split}.jsonl")[0]
    }
    by_package = package_pages()
    skipped = task_pages(by_package, task_flags)
    paths = sorted({p for pages in by_package.values() for p in pages} - skipped, key=_hash)
    counts, seen = collections.Counter(), set()
    with (
        open(config.output, "w", encoding="utf-8") as out,
        ThreadPoolExecutor(config.workers) as pool,
    ):
        for path, page in zip(paths, pool.map(render, paths[: config.max_pages])):
            key = hashlib.sha256(page.encode()).hexdigest()
            if not page.strip() or key in seen:
                counts["empty or repeated pages"] += 1
                continue
            seen.add(key)
            kept = []
            for text in paragraphs(page, 1, 10**9):
                if text[: task_flags["max_chars"]] in held:
                    counts["task paragraphs left out"] += 1
                else:
                    kept.append(text)
            if kept:
                out.write(json.dumps({"text": "\n\n".join(kept), "source": path}) + "\n")
                counts["documents"] += 1
                counts["characters"] += sum(map(len, kept))
    return {"task pages left out": len(skipped), **counts}


def _read(path: str) -> tuple[list[str], list[str]]:
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [r["text"] for r in rows], [r["label"] for r in rows]


def _words(text: str) -> list[str]:
    return re.findall(r"(?u)\b\w\w+\b", text.lower())  # scikit-learn's token pattern


def tfidf_matrices(train: list[str], *others: list[str]) -> list[np.ndarray]:
    vocabulary = {w: i for i, w in enumerate(sorted({w for t in train for w in _words(t)}))}

    def counts(texts):
        matrix = np.zeros((len(texts), len(vocabulary)), np.float64)
        for row, text in enumerate(texts):
            for word in _words(text):
                if word in vocabulary:
                    matrix[row, vocabulary[word]] += 1
        return matrix

    train_counts = counts(train)
    idf = np.log((1 + len(train)) / (1 + (train_counts > 0).sum(0))) + 1
    out = []
    for matrix in (train_counts, *map(counts, others)):
        matrix = np.where(matrix > 0, 1 + np.log(np.maximum(matrix, 1)), 0) * idf
        out.append(matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12))
    return out


def logistic_regression(x: np.ndarray, y: np.ndarray, classes: int, c: float) -> np.ndarray:
    """Multinomial logistic regression with L2 penalty 1/(2C) on the weights (scikit-learn's
    objective: the summed loss plus ||W||^2 / 2C); returns [features + 1, classes]."""
    from scipy.optimize import minimize

    xb = np.hstack([x, np.ones((len(x), 1))])
    onehot = np.eye(classes)[y]

    def loss(flat):
        w = flat.reshape(xb.shape[1], classes)
        logits = xb @ w
        logits -= logits.max(1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(1, keepdims=True)
        value = -np.sum(onehot * np.log(p + 1e-300)) + np.sum(w[:-1] ** 2) / (2 * c)
        grad = xb.T @ (p - onehot)
        grad[:-1] += w[:-1] / c
        return value, grad.ravel()

    start = np.zeros(xb.shape[1] * classes)
    fitted = minimize(loss, start, jac=True, method="L-BFGS-B", options={"maxiter": 500})
    return fitted.x.reshape(xb.shape[1], classes)


def tfidf(config: TfidfFlags) -> dict:
    splits = {s: _read(os.path.join(config.task, f"{s}.jsonl")) for s in ("train", "dev", "test")}
    splits = {s: ([t[: config.max_chars] for t in texts], y) for s, (texts, y) in splits.items()}
    names = sorted(set(splits["train"][1]))
    ids = {s: np.array([names.index(label) for label in splits[s][1]]) for s in splits}
    x_train, x_dev, x_test = tfidf_matrices(*(splits[s][0] for s in ("train", "dev", "test")))

    def accuracy(w, x, y):
        return float((np.hstack([x, np.ones((len(x), 1))]) @ w).argmax(1).__eq__(y).mean())

    dev_by_c = {}
    for c in (0.3, 1.0, 3.0, 10.0, 30.0, 100.0):
        dev_by_c[c] = accuracy(
            logistic_regression(x_train, ids["train"], len(names), c), x_dev, ids["dev"]
        )
    best = max(dev_by_c, key=lambda c: (dev_by_c[c], -c))
    weights = logistic_regression(x_train, ids["train"], len(names), best)
    majority = collections.Counter(ids["train"]).most_common(1)[0][0]
    return {
        "dev_accuracy_by_C": dev_by_c,
        "C": best,
        "dev_accuracy": dev_by_c[best],
        "test_accuracy": accuracy(weights, x_test, ids["test"]),
        "test_majority_class": float((ids["test"] == majority).mean()),
    }


def table(config: TableFlags) -> list[str]:
    """One row per recipe (start, pooling, rate, epochs), its seeds gathered from every
    output folder that ran it: test and dev accuracy (mean ± sample std), per-seed test
    accuracy, collapsed seeds, seconds per seed."""
    recipes = collections.defaultdict(list)
    for name in sorted(os.listdir(config.runs)):
        path = os.path.join(config.runs, name, "results.json")
        if os.path.exists(path):
            with open(path) as f:
                found = json.load(f)
            protocol = found["protocol"]
            start = "scratch" if found["model"]["from_scratch"] else "pretrained"
            key = (start, protocol.get("pooling") or "cls", protocol["learning_rate"])
            recipes[(*key, protocol["epochs"])] += found["scores"]["seeds"]
    rows = ["| start | pooling | lr | epochs | seeds | test acc. | dev acc. | per seed | s/seed |"]
    rows.append("|---|---|---|---|---|---|---|---|---|")
    for (start, pooling, rate, epochs), seeds in sorted(recipes.items()):
        seeds = sorted(seeds, key=lambda r: r["seed"])
        test = np.array([100 * r["test"]["accuracy"] for r in seeds])
        dev = np.array([100 * r["dev"]["accuracy"] for r in seeds])
        per_seed = ", ".join(
            f"{t:.1f}" + (" (collapsed)" if r["collapsed"] else "") for t, r in zip(test, seeds)
        )
        seconds = np.mean([r["seconds"] for r in seeds])

        def spread(values):
            std = values.std(ddof=1) if len(values) > 1 else 0.0
            return f"{values.mean():.1f}" + (f" ± {std:.1f}" if len(values) > 1 else "")

        rows.append(
            f"| {start} | {pooling} | {rate:g} | {epochs} | {len(seeds)} | {spread(test)} "
            f"| {spread(dev)} | {per_seed} | {seconds:.0f} |"
        )
    return rows


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parsed = flags.parse_command(
        "benchmarks.man_task",
        __doc__.split("\n\n")[0],
        {"build": BuildFlags, "corpus": CorpusFlags, "tfidf": TfidfFlags, "table": TableFlags},
        argv,
    )
    if parsed is None:
        return 2
    command, config = parsed
    if command == "table":
        return run_cli(lambda: print("\n".join(table(config))), argv)
    run = {"build": build, "corpus": corpus, "tfidf": tfidf}[command]
    return run_cli(lambda: print(json.dumps(run(config), indent=1)), argv)


if __name__ == "__main__":
    sys.exit(main())
