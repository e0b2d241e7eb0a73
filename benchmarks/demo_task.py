"""`make demo`'s downstream task: which installed package a docstring of the demo corpus came
from, and the line that puts the fine-tuned scores of the pretrained model and of random
weights side by side.

    python -m benchmarks.demo_task build --corpus runs/demo/corpus.jsonl --output_dir TASK
    python -m benchmarks.demo_task report --finetune_dir FT --budgets few,all

`build` labels every document of `beam_pipelines.demo_corpus` by the package of its `source`
(the folder after `site-packages`, or `stdlib`), keeps the `--labels` packages with the most
documents (at least `--min_per_label` each), takes the same number of documents of each (at
most `--per_label`, chosen by a hash of the text, not by file order), cuts each text to
`--max_chars` and writes `train.jsonl` and `dev.jsonl` (a document goes to dev when the hash
of its text says so: one text is never in both), and `train-N.jsonl`, the first `--budget`
training documents of each label (a small label budget). Same corpus, same files, byte for byte.
The docstrings were also in the pretraining text, without their labels: the pretrained model
has read dev's texts, random weights have not (docs/finetuning.md).

`report` reads `trainer.finetune`'s results.json files, a pretrained and a from-scratch one per
label budget (`FT/pretrained-few`, `FT/scratch-few`, then `-all`), and prints a line per budget
(the dev score of each, mean ± std over its seeds, and the gap), the pretrained model's masked
accuracy, and what pretraining saved: the smallest budget at which the pretrained model scores
at least what random weights score with every label.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import sys

from common import flags, fs
from common.errors import UserError, run_cli
from common.flags import flag
from trainer.finetuning import results as finetune_results

STDLIB = "stdlib"
SIDES = ("pretrained", "scratch")  # report's folders: {side}-{budget}
PACKAGE_FOLDERS = ("site-packages", "dist-packages")


@dataclasses.dataclass
class BuildFlags:
    corpus: str = flag(
        "The demo corpus (beam_pipelines.demo_corpus's JSONL: text, source).", required=True
    )
    output_dir: str = flag("Where train.jsonl and dev.jsonl go.", required=True)
    labels: int = flag("How many packages (labels): those with the most documents.", 8, minimum=2)
    per_label: int = flag(
        "At most this many documents per label (every label gets the same number).", 300, minimum=2
    )
    min_per_label: int = flag("A package with fewer documents is not a label.", 50, minimum=2)
    dev_share: float = flag(
        "Share of each label's documents that go to dev.", 0.2, greater_than=0.0, less_than=1.0
    )
    max_chars: int = flag(
        "Each text is cut to this many characters (the demo's model reads 64 tokens).",
        600,
        minimum=1,
    )
    budget: int = flag(
        "Also write train-N.jsonl: the first N training documents of each label, a small "
        "label budget (what pretraining saves shows there); 0: none.",
        16,
        minimum=0,
    )


@dataclasses.dataclass
class ReportFlags:
    finetune_dir: str = flag(
        "trainer.finetune's output folders are in it: pretrained-B/ and scratch-B/ (the "
        "latter --from_scratch) for each label budget B.",
        required=True,
    )
    budgets: str = flag("The label budgets B, fewest labels first (comma-separated).", "few,all")
    output: str = flag("Also write the lines to this file.")


def package_of(source: str) -> str:
    """The label of a document: the top-level package after the last site-packages (or
    dist-packages) folder of its source path, a one-file module without `.py`; else stdlib."""
    parts = source.replace("\\", "/").split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in PACKAGE_FOLDERS:
            name = parts[i + 1]
            return name[:-3] if name.endswith(".py") else name
    return STDLIB


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def read_corpus(path: str) -> dict[str, list[str]]:
    """{label: texts} of the corpus, each text once (the first source that has it)."""
    by_label, seen = collections.defaultdict(list), set()
    if not fs.exists(path):
        raise UserError(
            f"{path} does not exist: write it with python -m beam_pipelines.demo_corpus"
        )
    lines = fs.read_bytes(path).decode("utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text, source = row["text"], row["source"]
        except (ValueError, KeyError, TypeError):
            raise UserError(
                f"{path} line {number} is not a demo corpus document (JSON with text and source)"
            ) from None
        if text.strip() and text not in seen:
            seen.add(text)
            by_label[package_of(source)].append(text)
    return by_label


def split_task(by_label: dict, config: BuildFlags) -> tuple[list, list, list]:
    """(label names, train rows, dev rows): the chosen labels, balanced, split by hash."""
    ranked = sorted(by_label, key=lambda name: (-len(by_label[name]), name))
    names = [n for n in ranked if len(by_label[n]) >= config.min_per_label][: config.labels]
    if len(names) < 2:
        raise UserError(
            f"the corpus has {len(names)} package(s) with at least "
            f"{config.min_per_label} documents: no task (a larger corpus helps)"
        )
    take = min(config.per_label, *(len(by_label[n]) for n in names))
    train, dev = [], []
    for name in sorted(names):
        texts = sorted(by_label[name], key=_digest)[:take]  # chosen by hash, not file order
        for text in texts:
            row = {"text": text[: config.max_chars], "label": name}
            # A second hash decides the split, independent of the one that chose the text.
            in_dev = _digest("dev:" + text) % 10_000 < config.dev_share * 10_000
            (dev if in_dev else train).append(row)
    # Rows in hash order: labels interleaved, the same order every time.
    train.sort(key=lambda row: _digest(row["text"]))
    dev.sort(key=lambda row: _digest(row["text"]))
    return sorted(names), train, dev


def budget_rows(train: list, per_label: int) -> list:
    """The first `per_label` rows of each label, in train's (hash) order."""
    taken = collections.Counter()
    kept = []
    for row in train:
        if taken[row["label"]] < per_label:
            taken[row["label"]] += 1
            kept.append(row)
    return kept


def build(config: BuildFlags) -> dict:
    """Writes the task; returns {labels, train, dev, per_label}."""
    names, train, dev = split_task(read_corpus(config.corpus), config)
    files = [("train", train), ("dev", dev)]
    if config.budget:
        files.append((f"train-{config.budget}", budget_rows(train, config.budget)))
    for name, rows in files:
        body = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        fs.write_bytes(fs.join(config.output_dir, f"{name}.jsonl"), body.encode("utf-8"))
    counts = collections.Counter(row["label"] for row in train + dev)
    print(
        f"demo task: {len(names)} labels ({', '.join(names)}), {counts[names[0]]} documents "
        f"each; {len(train)} train, {len(dev)} dev -> {config.output_dir}"
    )
    return {"labels": names, "train": len(train), "dev": len(dev), "per_label": dict(counts)}


def _read_results(folder: str) -> dict:
    path = fs.join(folder, finetune_results.RESULTS)
    if not fs.exists(path):
        raise UserError(f"{path} does not exist: run python -m trainer.finetune first")
    return json.loads(fs.read_bytes(path).decode("utf-8"))


def _score(document: dict, metric: str) -> str:
    summary = document["scores"]["summary"]["dev"][metric]
    seeds = len(document["scores"]["seeds"])
    collapsed = document["scores"]["summary"]["collapsed_seeds"]
    note = f", {len(collapsed)} collapsed" if collapsed else ""
    return f"{summary['mean']:.3f} ± {summary['std']:.3f} ({seeds} seeds{note})"


def _check_pair(pretrained: dict, scratch: dict) -> str:
    """The pair's selection metric, once both are known to be what their flags say."""
    metric = pretrained["scores"]["metric"]
    for document, scratch_run, flag_name in (
        (pretrained, False, "--pretrained"),
        (scratch, True, "--scratch"),
    ):
        if document.get("model", {}).get("from_scratch", scratch_run) != scratch_run:
            raise UserError(
                f"{flag_name} names a fine-tune "
                f"{'from pretrained weights' if scratch_run else 'from scratch'}: "
                "the two folders are swapped or wrong"
            )
    if scratch["scores"]["metric"] != metric:
        raise UserError(
            f"the two runs were selected on different metrics ({metric}, "
            f"{scratch['scores']['metric']}): not comparable"
        )
    return metric


def _masked(pretrained: dict) -> str:
    pre = pretrained["pretraining"]
    if pre["masked_accuracy"] is None:
        return "unknown"
    masked = f"{100 * pre['masked_accuracy']:.1f} %"
    if pre["unigram_baseline"]:
        masked += f", {pre['masked_accuracy'] / pre['unigram_baseline']:.1f}x the unigram baseline"
    return masked


def _labelled(document: dict) -> int:
    return int(document.get("data", {}).get("train", {}).get("examples") or 0)


def _mean(document: dict, metric: str) -> float:
    return document["scores"]["summary"]["dev"][metric]["mean"]


def report_lines(pairs: list[tuple[dict, dict]]) -> list[str]:
    """A head line, one line per label budget (pretrained vs random weights, the gap), and,
    with two budgets or more, what pretraining saved: the smallest budget whose pretrained
    score reaches random weights' with the most labels."""
    metrics = {_check_pair(pre, scratch) for pre, scratch in pairs}
    if len(metrics) != 1:
        raise UserError(f"the label budgets were selected on different metrics {sorted(metrics)}")
    metric, (first, _) = metrics.pop(), pairs[0]
    labels = len(first["task"]["labels"] or ())
    lines = [
        f"downstream ({labels}-label package task, dev {metric}; the model's masked accuracy "
        f"{_masked(first)}):"
    ]
    for pre, scratch in pairs:
        gap = _mean(pre, metric) - _mean(scratch, metric)
        lines.append(
            f"  {_labelled(pre):,} labelled documents: pretrained {_score(pre, metric)} vs "
            f"random weights {_score(scratch, metric)}: {gap:+.3f}"
        )
    if len(pairs) > 1:
        lines.append("  " + _saved(pairs, metric))
    return lines


def _saved(pairs: list[tuple[dict, dict]], metric: str) -> str:
    most = max(pairs, key=lambda pair: _labelled(pair[1]))[1]
    target, all_labels = _mean(most, metric), _labelled(most)
    for pre, _ in sorted(pairs, key=lambda pair: _labelled(pair[0])):
        if _mean(pre, metric) >= target and _labelled(pre) < all_labels:
            share = 1 - _labelled(pre) / all_labels
            return (
                f"pretrained with {_labelled(pre):,} labels ({_mean(pre, metric):.3f}) scores "
                f"at least what random weights score with {all_labels:,} ({target:.3f}): "
                f"pretraining saved {100 * share:.0f} % of the labels"
            )
    fewer = [pre for pre, _ in pairs if _labelled(pre) < all_labels] or [pairs[0][0]]
    closest = max(fewer, key=_labelled)  # the largest budget below all: the nearest miss
    return (
        f"random weights with {all_labels:,} labels ({target:.3f}) score above the pretrained "
        f"model with {_labelled(closest):,} ({_mean(closest, metric):.3f}): no labels saved "
        "at these budgets"
    )


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parsed = flags.parse_command(
        "benchmarks.demo_task",
        __doc__.split("\n\n")[0],
        {"build": BuildFlags, "report": ReportFlags},
        argv,
    )
    if parsed is None:
        return 2
    command, config = parsed

    def body():
        if command == "build":
            build(config)
        else:
            pairs = [
                tuple(
                    _read_results(fs.join(config.finetune_dir, f"{side}-{budget}"))
                    for side in SIDES
                )
                for budget in config.budgets.split(",")
                if budget
            ]
            text = "\n".join(report_lines(pairs)) + "\n"
            print(text, end="")
            if config.output:
                fs.write_bytes(config.output, text.encode("utf-8"))

    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
