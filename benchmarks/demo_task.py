"""`make demo`'s downstream task: which installed package a docstring of the demo corpus came
from, and the line that puts the fine-tuned scores of the pretrained model and of random
weights side by side.

    python -m benchmarks.demo_task build --corpus runs/demo/corpus.jsonl --output_dir TASK
    python -m benchmarks.demo_task report --pretrained FT_PRE --scratch FT_SCRATCH

`build` labels every document of `beam_pipelines.demo_corpus` by the package of its `source`
(the folder after `site-packages`, or `stdlib`), keeps the `--labels` packages with the most
documents (at least `--min_per_label` each), takes the same number of documents of each (at
most `--per_label`, chosen by a hash of the text, not by file order), cuts each text to
`--max_chars` and writes `train.jsonl` and `dev.jsonl` (a document goes to dev when the hash
of its text says so: one text is never in both). Same corpus, same files, byte for byte.
The docstrings were also in the pretraining text, without their labels: the pretrained model
has read dev's texts, random weights have not (docs/finetuning.md).

`report` reads two `trainer.finetune` results.json files and prints one line: the dev score
of each (mean ± std over its seeds) and the pretrained model's masked accuracy.
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


@dataclasses.dataclass
class ReportFlags:
    pretrained: str = flag(
        "trainer.finetune's output folder for the pretrained model.", required=True
    )
    scratch: str = flag("trainer.finetune's output folder for --from_scratch.", required=True)
    output: str = flag("Also write the line to this file.")


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


def build(config: BuildFlags) -> dict:
    """Writes the task; returns {labels, train, dev, per_label}."""
    names, train, dev = split_task(read_corpus(config.corpus), config)
    for name, rows in (("train", train), ("dev", dev)):
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


def report_line(pretrained: dict, scratch: dict) -> str:
    """One line: dev metric pretrained vs from scratch, and the masked accuracy."""
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
    pre = pretrained["pretraining"]
    masked = (
        "unknown" if pre["masked_accuracy"] is None else f"{100 * pre['masked_accuracy']:.1f} %"
    )
    if pre["masked_accuracy"] is not None and pre["unigram_baseline"]:
        masked += f", {pre['masked_accuracy'] / pre['unigram_baseline']:.1f}x the unigram baseline"
    labels = len(pretrained["task"]["labels"] or ())
    return (
        f"downstream ({labels}-label package task, dev {metric}): pretrained "
        f"{_score(pretrained, metric)} vs from scratch {_score(scratch, metric)}; "
        f"masked accuracy {masked}"
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
            line = report_line(_read_results(config.pretrained), _read_results(config.scratch))
            print(line)
            if config.output:
                fs.write_bytes(config.output, (line + "\n").encode("utf-8"))

    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
