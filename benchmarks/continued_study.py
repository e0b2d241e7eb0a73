"""The evidence for `--init_from`: continue the demo's exported model on a second corpus
of different text (the machine's English manual pages) and compare it with the demo model
as it is and with training from scratch for the same steps (docs/training.md, "Continue from an
existing model", has the commands and the table).

    python -m benchmarks.continued_study corpus --output_dir OUT
    python -m benchmarks.continued_study report --zero RUN0 --continued RUN --scratch RUN \
        [--ft_zero FT --ft_continued FT --ft_scratch FT] [--output table.md]

`corpus` renders up to `--per_section` manual pages of each of `--sections` (chosen by a hash
of the file name, not by directory order) with `man` and writes `OUT/corpus.jsonl` (one page a
document: text, source) for the masked LM, and a downstream task `OUT/task/{train,dev}.jsonl`:
which section a paragraph comes from. Every page's header and footer lines (which name the
section) are dropped; a page goes wholly to train or to dev (hash of its path), so paragraphs of
one page are never on both sides; every section gives the same number of paragraphs.

It also writes a second task that surface words cannot solve, `OUT/task_order/{train,dev}.jsonl`:
two consecutive sentences of a paragraph, given in their order or swapped (half each, by a hash),
as a text pair; both orders hold the same words, so a model must read their order and relation.

`report` reads the three masked-LM runs' history.json (the LAST evaluation of each; a 0-step
model is measured as a 1-step run at a learning rate of 1e-9) and, when given, the three
`trainer.finetune` results.json, and prints one Markdown table.
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

from common import flags, fs
from common.errors import UserError, run_cli
from common.flags import flag

MAN_ROOT = "/usr/share/man"


@dataclasses.dataclass
class CorpusFlags:
    output_dir: str = flag("Where corpus.jsonl and task/{train,dev}.jsonl go.", required=True)
    sections: str = flag("Manual sections, comma separated: the task's labels.", "1,2,3,5,7,8")
    per_section: int = flag("At most this many pages of each section.", 150, minimum=2)
    per_page: int = flag("At most this many task paragraphs from one page.", 3, minimum=1)
    per_label: int = flag(
        "At most this many task paragraphs per section (every section gets the same number).",
        300,
        minimum=2,
    )
    min_chars: int = flag("A task paragraph has at least this many characters.", 150, minimum=1)
    max_chars: int = flag("Each task paragraph is cut to this many characters.", 600, minimum=1)
    dev_share: float = flag(
        "Share of each section's pages that go to dev.", 0.25, greater_than=0.0, less_than=1.0
    )
    man_root: str = flag("The manual's root folder.", MAN_ROOT)
    order_per_page: int = flag(
        "At most this many sentence pairs from one page (the order task).", 4, minimum=1
    )


@dataclasses.dataclass
class ReportFlags:
    zero: str = flag(
        "The demo model unchanged: a run of --init_from DEMO_EXPORT, 1 step at "
        "learning rate 1e-9, on the second corpus.",
        required=True,
    )
    continued: str = flag(
        "The run(s) --init_from the demo's export for N steps, comma "
        "separated (e.g. at two learning rates).",
        required=True,
    )
    scratch: str = flag("The run from random weights for the same N steps.", required=True)
    ft_zero: str = flag("trainer.finetune's output folder for the unchanged demo model.")
    ft_continued: str = flag(
        "trainer.finetune's output folder(s) for the continued model(s), "
        "comma separated, one per --continued."
    )
    ft_scratch: str = flag("trainer.finetune's output folder for the from-scratch model.")
    ft_random: str = flag(
        "trainer.finetune's output folder with --from_scratch (random "
        "weights, no pretraining): the floor."
    )
    output: str = flag("Also write the table to this file.")


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def page_files(man_root: str, section: str, limit: int) -> list[str]:
    """Up to `limit` regular files of `man_root/man{section}`, chosen by a hash of the name
    (directory order would take one package's pages together)."""
    paths = [
        p
        for p in glob.glob(os.path.join(man_root, f"man{section}", "*"))
        if os.path.isfile(p) and not os.path.islink(p)
    ]
    return sorted(paths, key=lambda p: _digest(os.path.basename(p)))[:limit]


def render(path: str) -> str:
    """A page as `man` prints it, overstrikes removed; "" when it cannot be rendered."""
    env = dict(os.environ, MANWIDTH="100", LANG="C.UTF-8")
    try:
        out = subprocess.run(
            ["man", "-l", "-E", "UTF-8", path],
            capture_output=True,
            env=env,
            timeout=30,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return re.sub(r".\x08", "", out.decode("utf-8", "replace"))


def paragraphs(page: str) -> list[str]:
    """The page's paragraphs, each wrapped line joined with single spaces; the header and
    footer lines (`ls(1) ... User Commands ... ls(1)`) name the section and are dropped."""
    lines = page.splitlines()
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) < 3:
        return []
    body, out, current = lines[filled[0] + 1 : filled[-1]], [], []
    for line in body + [""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            out.append(re.sub(r"\s+", " ", " ".join(current)))
            current = []
    return out


def split_task(pages: dict, config: CorpusFlags) -> tuple[list, list]:
    """(train, dev) rows {text, label} from {path: (section, paragraphs)}: balanced sections,
    a page's paragraphs all on one side."""
    by_label = collections.defaultdict(list)
    for path in sorted(pages):
        section, paras = pages[path]
        long = [p for p in paras if len(p) >= config.min_chars]
        long = sorted(long, key=_digest)[: config.per_page]
        in_dev = _digest("dev:" + os.path.basename(path)) % 10_000 < config.dev_share * 10_000
        by_label[section] += [(p[: config.max_chars], in_dev) for p in long]
    if len(by_label) < 2:
        raise UserError(
            f"{len(by_label)} manual section(s) gave paragraphs of at least "
            f"{config.min_chars} characters: no task (is `man` installed?)"
        )
    take = min(config.per_label, *(len(rows) for rows in by_label.values()))
    train, dev = [], []
    for label, rows in sorted(by_label.items()):
        for text, in_dev in sorted(rows, key=lambda row: _digest(row[0]))[:take]:
            (dev if in_dev else train).append({"text": text, "label": f"man{label}"})
    train.sort(key=lambda row: _digest(row["text"]))
    dev.sort(key=lambda row: _digest(row["text"]))
    return train, dev


# A sentence ends at . ! or ? followed by a space and an upper-case letter (an option list's
# "-a, --all" and "e.g. foo" stay inside their sentence).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def sentence_pairs(paragraph: str, min_chars: int = 30, max_chars: int = 200) -> list:
    """Consecutive (first, second) sentences of a paragraph, each of a readable length."""
    sentences = [x.strip() for x in _SENTENCE_END.split(paragraph)]
    return [
        (a, b)
        for a, b in zip(sentences, sentences[1:])
        if min_chars <= len(a) <= max_chars and min_chars <= len(b) <= max_chars
    ]


def order_task(pages: dict, config: CorpusFlags) -> tuple[list, list]:
    """(train, dev) rows {text, text_pair, label}: a pair kept in order or swapped, by a hash
    of its first sentence; a page's pairs all on one side, as in `split_task`. A sentence
    found more than once (licence and copyright boilerplate) is left out: its order would be
    learned by heart in train and recalled in dev."""
    by_page = {path: [x for p in pages[path][1] for x in sentence_pairs(p)] for path in pages}
    seen = collections.Counter(x for pairs in by_page.values() for x in {*sum(pairs, ())})
    train, dev = [], []
    for path in sorted(pages):
        pairs = [pair for pair in by_page[path] if seen[pair[0]] == 1 and seen[pair[1]] == 1]
        pairs = sorted(pairs, key=lambda pair: _digest(pair[0]))[: config.order_per_page]
        in_dev = _digest("dev:" + os.path.basename(path)) % 10_000 < config.dev_share * 10_000
        for first, second in pairs:
            swapped = _digest("order:" + first) % 2 == 1
            row = {"text": second, "text_pair": first, "label": "swapped"}
            if not swapped:
                row = {"text": first, "text_pair": second, "label": "in_order"}
            (dev if in_dev else train).append(row)
    return train, dev


def _write_jsonl(path: str, rows: list) -> None:
    body = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    fs.write_bytes(path, body.encode("utf-8"))


def build_corpus(config: CorpusFlags, render_page=render) -> dict:
    """Writes corpus.jsonl and task/{train,dev}.jsonl; returns their sizes."""
    sections = [s.strip() for s in config.sections.split(",") if s.strip()]
    pages, documents = {}, []
    for section in sections:
        for path in page_files(config.man_root, section, config.per_section):
            paras = paragraphs(render_page(path))
            if paras:
                pages[path] = (section, paras)
                documents.append({"text": "\n\n".join(paras), "source": path})
    if not documents:
        raise UserError(
            f"no manual page of sections {config.sections} under "
            f"{config.man_root} could be rendered with `man`"
        )
    train, dev = split_task(pages, config)
    _write_jsonl(fs.join(config.output_dir, "corpus.jsonl"), documents)
    _write_jsonl(fs.join(config.output_dir, "task", "train.jsonl"), train)
    _write_jsonl(fs.join(config.output_dir, "task", "dev.jsonl"), dev)
    order_train, order_dev = order_task(pages, config)
    _write_jsonl(fs.join(config.output_dir, "task_order", "train.jsonl"), order_train)
    _write_jsonl(fs.join(config.output_dir, "task_order", "dev.jsonl"), order_dev)
    chars = sum(len(d["text"]) for d in documents)
    print(
        f"manual pages: {len(documents)} pages, {chars / 1e6:.2f} M characters; task "
        f"{len(sections)} sections, {len(train)} train, {len(dev)} dev; order task "
        f"{len(order_train)} train, {len(order_dev)} dev -> {config.output_dir}"
    )
    sizes = {"pages": len(documents), "chars": chars, "train": len(train), "dev": len(dev)}
    return {**sizes, "order_train": len(order_train), "order_dev": len(order_dev)}


def _read_json(path: str, hint: str):
    if not fs.exists(path):
        raise UserError(f"{path} does not exist: {hint}")
    return json.loads(fs.read_bytes(path).decode("utf-8"))


def last_eval(run_dir: str) -> dict:
    """{step, eval_loss, eval_accuracy, init_from} of the run's last evaluation."""
    history = _read_json(fs.join(run_dir, "history.json"), "run python -m trainer.task first")
    evals = [row for row in history if "eval_loss" in row]
    if not evals:
        raise UserError(f"{run_dir}/history.json has no evaluation: give --eval_every")
    config = _read_json(fs.join(run_dir, "run_config.json"), "not a training run folder")
    row = evals[-1]
    return {
        "step": row["step"],
        "eval_loss": row["eval_loss"],
        "eval_accuracy": row["eval_accuracy"],
        "init_from": config.get("init_from"),
        "learning_rate": config.get("learning_rate"),
    }


def downstream(folder: str | None) -> str:
    if not folder:
        return "not run"
    document = _read_json(fs.join(folder, "results.json"), "run python -m trainer.finetune")
    metric = document["scores"]["metric"]
    summary = document["scores"]["summary"]["dev"][metric]
    # A collapsed seed (one answer for every dev example) is counted in the mean: say so.
    collapsed = document["scores"]["summary"].get("collapsed_seeds") or ()
    note = f", {len(collapsed)} collapsed" if collapsed else ""
    return (
        f"{summary['mean']:.3f} ± {summary['std']:.3f} ({len(document['scores']['seeds'])}{note})"
    )


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _rows(config: ReportFlags) -> list[tuple]:
    """(name, run folder, fine-tune folder or None, started from the demo model)."""
    continued, ft = _split(config.continued), _split(config.ft_continued)
    if ft and len(ft) != len(continued):
        raise UserError(
            f"--ft_continued names {len(ft)} folder(s) for {len(continued)} "
            "--continued run(s): give one per run, in the same order"
        )
    rows = [("demo model, not continued", config.zero, config.ft_zero, True)]
    rows += [
        ("demo model continued (`--init_from`)", run, ft[i] if ft else None, True)
        for i, run in enumerate(continued)
    ]
    return rows + [("from scratch", config.scratch, config.ft_scratch, False)]


def _metric(folders: list) -> str:
    """The fine-tunes' metric, for the column's title (both tasks share the table's layout)."""
    for folder in folders:
        if folder:
            return _read_json(fs.join(folder, "results.json"), "")["scores"]["metric"]
    return "score"


def report_table(config: ReportFlags) -> str:
    rows = _rows(config)
    metric = _metric([ft for _, _, ft, _ in rows] + [config.ft_random])
    lines = [
        "| model | steps on man pages | peak learning rate | eval MLM loss | "
        f"eval masked accuracy | downstream dev {metric} (seeds) |",
        "|---|---|---|---|---|---|",
    ]
    for name, run_dir, ft, continued in rows:
        run = last_eval(run_dir)
        if bool(run["init_from"]) != continued:
            raise UserError(
                f"{run_dir} was {'not ' if continued else ''}started with "
                f"--init_from: the folders are swapped or wrong"
            )
        zero = run_dir == config.zero
        rate = "default" if run["learning_rate"] is None else f"{run['learning_rate']:g}"
        steps, rate = (0, "-") if zero else (run["step"], rate)
        lines.append(
            f"| {name} | {steps} | {rate} | {run['eval_loss']:.3f} | "
            f"{100 * run['eval_accuracy']:.1f} % | {downstream(ft)} |"
        )
    if config.ft_random:
        lines.append(
            f"| random weights (no pretraining) | 0 | - | - | - | {downstream(config.ft_random)} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parsed = flags.parse_command(
        "benchmarks.continued_study",
        __doc__.split("\n\n")[0],
        {"corpus": CorpusFlags, "report": ReportFlags},
        argv,
    )
    if parsed is None:
        return 2
    command, config = parsed

    def body():
        if command == "corpus":
            build_corpus(config)
        else:
            table = report_table(config)
            print(table)
            if config.output:
                fs.write_bytes(config.output, (table + "\n").encode("utf-8"))

    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
