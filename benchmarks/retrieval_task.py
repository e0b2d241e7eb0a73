"""Retrieval tasks of real text that needs no download: find the text a one-line description
was written for. Each writes training pairs and a held-out BEIR folder.

    python -m benchmarks.retrieval_task docstrings --corpus runs/demo/corpus.jsonl --output_dir T
    python -m benchmarks.retrieval_task manpages --output_dir T

`docstrings` reads beam_pipelines.demo_corpus's documents (JSONL: text, source): the query is a
docstring's summary, the first sentence its author wrote (the first line when it has no
sentence end; a signature line, a field list or a generic one like "Initialize self." is no
summary), the document the rest of the docstring. `manpages` renders the English manual pages
(`/usr/share/man/man[1-8]`, with `man` as benchmarks.man_task does, in an order fixed by a hash
of the path, until the caps are filled): the query is the NAME line's description without the
page's names ("ls - list directory contents" gives "list directory contents"; a description
that still names the page is left out), the document the first paragraphs of DESCRIPTION.
`--exclude` leaves out the Google Cloud CLI's generated pages (near-identical variants).

Both keep queries of at least `--min_query_words` words and documents of at least
`--min_doc_chars` characters (cut to `--max_chars` at a word's end). A document given twice is
kept once (its first query); a query given for two documents is ambiguous and left out. A hash
of the document's text puts it in training or held out (`--heldout_share`). `DIR/train.jsonl`:
up to `--max_train` pairs (trainer/tasks/pairs.py: query, positive). `DIR/beir/`: corpus.jsonl
holds every held-out document (up to `--max_corpus`, chosen by hash), topped up to
`--max_corpus` with training documents as distractors (not with `--heldout_only`);
queries.jsonl the held-out queries, a hash of each putting it in `qrels/dev.tsv` or
`qrels/test.tsv` (up to `--max_queries` each). `DIR/task.json`: the counts and flags. Texts are
compared as trainer.tasks.pairs.text_key does. Same input, same bytes.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import hashlib
import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor

from benchmarks import man_task
from common import flags, fs
from common.errors import UserError, run_cli
from common.flags import flag
from trainer.tasks.pairs import text_key

SPLITS = ("dev", "test")
GENERIC = re.compile(
    r"(initiali[sz]e self|see help\(|return repr\(self\)|create and return a new object"
    r"|implement \w+\(self|return self\b|x\.__\w+__|todo\b|docstring\b)",
    re.IGNORECASE,
)
SIGNATURE = re.compile(r"[\w.]+\(.*\)\s*(->.*)?:?")
SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z(*`\"'])")
NAME_DASH = re.compile(r"\s+[-\u2010-\u2015]+\s+")
MAN_BATCH = 64
HYPHEN = "\u2010"  # groff's hyphen where it breaks a word at a line's end


@dataclasses.dataclass
class Caps:
    output_dir: str = flag("Where train.jsonl, beir/ and task.json go.", required=True)
    max_train: int = flag("At most this many training pairs.", 2000, minimum=1)
    max_queries: int = flag("At most this many dev and this many test queries.", 200, minimum=1)
    max_corpus: int = flag(
        "At most this many documents in beir/corpus.jsonl (held-out first).", 3000, minimum=2
    )
    heldout_share: float = flag(
        "Share of the documents held out (by a hash of the text).",
        0.2,
        greater_than=0.0,
        less_than=1.0,
    )
    heldout_only: bool = flag("beir/corpus.jsonl holds no training documents as distractors.")
    min_query_words: int = flag("Shorter queries are left out.", 4, minimum=1)
    max_query_chars: int = flag("Longer queries are left out.", 200, minimum=10)
    min_doc_chars: int = flag("Shorter documents are left out.", 100, minimum=1)
    max_chars: int = flag("Each document is cut to this many characters.", 1000, minimum=50)

    def __post_init__(self):
        if problem := flags.out_of_bounds(type(self), self):
            raise UserError(problem)


@dataclasses.dataclass
class DocstringFlags(Caps):
    corpus: str = flag(
        "The demo corpus (beam_pipelines.demo_corpus's JSONL: text, source).", required=True
    )


@dataclasses.dataclass
class ManFlags(Caps):
    man_dir: str = flag("The English manual pages' folder (man1 ... man8 in it).", "/usr/share/man")
    exclude: str = flag(
        "Pages whose file name starts with one of these (comma-separated) are left out: the "
        "Google Cloud CLI's thousands of generated pages, in near-identical alpha, beta and GA "
        "variants that would put one text in two splits.",
        "gcloud",
    )
    min_query_words: int = flag("Shorter queries are left out.", 3, minimum=1)
    min_pages: int = flag("Fewer pages than this: refused (too few for a task).", 200, minimum=1)
    workers: int = flag("`man` processes at a time.", 4, minimum=1)


@dataclasses.dataclass(frozen=True)
class Pair:
    query: str
    document: str
    source: str


def _digest(text: str, salt: str = "") -> int:
    return int.from_bytes(hashlib.sha256((salt + text).encode("utf-8")).digest()[:8], "big")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from an escape in a docstring
        return False
    return True


def cut(text: str, max_chars: int) -> str:
    """`text` cut to at most `max_chars` characters, at the end of a word when there is one."""
    if len(text) <= max_chars:
        return text
    head = text[: max_chars + 1]
    end = max(head.rfind(" "), head.rfind("\n"))
    return (head[:end] if end > max_chars // 2 else text[:max_chars]).rstrip()


def usable(pair: Pair, caps: Caps) -> bool:
    query = pair.query
    return (
        len(query.split()) >= caps.min_query_words
        and len(query) <= caps.max_query_chars
        and query[0].isalpha()
        and not GENERIC.search(query)
        and len(pair.document) >= caps.min_doc_chars
        and _encodable(query + pair.document)
    )


def summary_split(doc: str) -> tuple[str, str] | None:
    """(summary, rest) of a docstring: the first sentence of its first paragraph (a field
    list's first line ends the paragraph), or its first line when that has no sentence end;
    None when the paragraph is a signature line or longer than a line without a sentence."""
    first, _, later = doc.strip().partition("\n\n")
    lines = first.splitlines()
    fields = next((i for i, line in enumerate(lines) if line.lstrip().startswith(":")), None)
    if fields is not None:
        later = "\n".join(lines[fields:]) + ("\n\n" + later if later else "")
        lines = lines[:fields]
    if not lines or SIGNATURE.fullmatch(lines[0].strip()):
        return None
    paragraph = " ".join(" ".join(lines).split())
    end = SENTENCE_END.search(paragraph)
    if end:
        summary, rest = paragraph[: end.end()], paragraph[end.end() :].strip()
    elif len(lines) == 1:
        summary, rest = paragraph, ""
    else:
        return None
    rest = f"{rest}\n\n{later}" if rest and later else rest or later
    return summary, rest.strip()


def docstring_pairs(path: str, caps: Caps) -> tuple[list[Pair], int]:
    """(usable pairs in file order, documents read) of a demo corpus file."""
    if not fs.exists(path):
        raise UserError(
            f"{path} does not exist: write it with python -m beam_pipelines.demo_corpus"
        )
    found, read = [], 0
    for number, line in enumerate(fs.read_bytes(path).decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text, source = row["text"], row["source"]
        except (ValueError, KeyError, TypeError):
            raise UserError(
                f"{path} line {number} is not a demo corpus document (JSON with text and source)"
            ) from None
        read += 1
        split = summary_split(text) if isinstance(text, str) else None
        if split:
            pair = Pair(split[0], cut(split[1], caps.max_chars), str(source))
            if usable(pair, caps):
                found.append(pair)
    return found, read


def sections(page: str) -> dict[str, list[str]]:
    """{heading: its paragraphs, lines joined} of a rendered manual page (header and footer
    lines left out), as man_task.paragraphs reads a page."""
    found, current, section = {}, [], None
    for line in [*page.splitlines()[1:-1], ""]:
        if line and not line[0].isspace():
            section, current = line.strip(), []
            found.setdefault(section, [])
        elif current and current[-1].endswith(HYPHEN) and line.strip()[:1].isalnum():
            # a word broken at a line's end: the hyphen is groff's before a lower-case letter
            head = current[-1][:-1] if line.strip()[:1].islower() else current[-1]
            current[-1] = head + line.strip()
        elif line.strip():
            current.append(line.strip())
        else:
            if current and section is not None:
                found[section].append(" ".join(" ".join(current).split()))
            current = []
    return found


def man_pair(page: str, source: str, caps: Caps) -> Pair | None:
    """The pair of a rendered page: NAME's description without the names, DESCRIPTION's first
    paragraphs; None when either is missing or the description names the page."""
    parts = sections(page)
    name = " ".join(parts.get("NAME", []))
    described = NAME_DASH.split(name, maxsplit=1)
    if len(described) != 2 or not parts.get("DESCRIPTION"):
        return None
    names, query = described[0], described[1].strip()
    for word in re.split(r"[,\s]+", names):
        if word and re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", query, re.IGNORECASE):
            return None
    pair = Pair(query, cut("\n\n".join(parts["DESCRIPTION"]), caps.max_chars), source)
    return pair if usable(pair, caps) else None


def dedupe(pairs: list[Pair]) -> tuple[list[Pair], dict]:
    """Each document once (its first pair), then without the queries given for two documents."""
    by_document = {}
    for pair in pairs:
        by_document.setdefault(text_key(pair.document), pair)
    queries = collections.Counter(text_key(pair.query) for pair in by_document.values())
    kept = [pair for pair in by_document.values() if queries[text_key(pair.query)] == 1]
    counts = {
        "repeated documents": len(pairs) - len(by_document),
        "ambiguous queries (pairs left out)": len(by_document) - len(kept),
    }
    return kept, counts


def select(pairs: list[Pair], caps: Caps) -> dict:
    """{train, dev, test: pairs; corpus: documents} from deduplicated pairs (module docstring)."""
    share = int(caps.heldout_share * 10_000)
    order = sorted(pairs, key=lambda p: (_digest(text_key(p.document), "order"), p.document))
    held = [p for p in order if _digest(text_key(p.document), "split") % 10_000 < share]
    train = [p for p in order if _digest(text_key(p.document), "split") % 10_000 >= share]
    held, train = held[: caps.max_corpus], train[: caps.max_train]
    task = {"train": train, "dev": [], "test": []}
    for pair in held:
        split = SPLITS[_digest(text_key(pair.query), "query") % 2]
        if len(task[split]) < caps.max_queries:
            task[split].append(pair)
    task["corpus"], task["heldout"] = [p.document for p in held], len(held)
    if not caps.heldout_only:
        task["corpus"] += [p.document for p in train][: caps.max_corpus - len(held)]
    return task


def _lines(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")


def _id(kind: str, text: str) -> str:
    return f"{kind}{_digest(text_key(text), kind):016x}"


def _recorded(caps: Caps) -> dict:
    """The flags task.json records: all but the output folder (same input, same bytes)."""
    return {k: v for k, v in dataclasses.asdict(caps).items() if k != "output_dir"}


def write(task: dict, caps: Caps, built: dict) -> dict:
    """Writes train.jsonl, beir/ and task.json under the output folder; returns the summary."""
    if not task["train"] or not task["dev"] or not task["test"]:
        sizes = ", ".join(f"{len(task[s])} {s}" for s in ("train", *SPLITS))
        raise UserError(f"too few pairs for a task ({sizes}): a larger input helps")
    out, beir = caps.output_dir, fs.join(caps.output_dir, "beir")
    train = [{"query": p.query, "positive": p.document} for p in task["train"]]
    fs.write_bytes(fs.join(out, "train.jsonl"), _lines(train))
    corpus = [{"_id": _id("d", text), "title": "", "text": text} for text in task["corpus"]]
    fs.write_bytes(fs.join(beir, "corpus.jsonl"), _lines(corpus))
    queries = [{"_id": _id("q", p.query), "text": p.query} for s in SPLITS for p in task[s]]
    fs.write_bytes(fs.join(beir, "queries.jsonl"), _lines(queries))
    for split in SPLITS:
        rows = ["query-id\tcorpus-id\tscore"]
        rows += [f"{_id('q', p.query)}\t{_id('d', p.document)}\t1" for p in task[split]]
        fs.write_bytes(fs.join(beir, "qrels", f"{split}.tsv"), ("\n".join(rows) + "\n").encode())
    summary = {
        "train_pairs": len(train),
        "dev_queries": len(task["dev"]),
        "test_queries": len(task["test"]),
        "corpus_documents": len(corpus),
        "corpus_heldout_documents": task["heldout"],
        "corpus_training_documents": len(corpus) - task["heldout"],
        **built,
    }
    fs.write_bytes(
        fs.join(out, "task.json"),
        (json.dumps({**summary, "flags": _recorded(caps)}, indent=1) + "\n").encode(),
    )
    return summary


def build_docstrings(config: DocstringFlags) -> dict:
    pairs, read = docstring_pairs(config.corpus, config)
    kept, counts = dedupe(pairs)
    built = {
        "source": "docstrings (beam_pipelines.demo_corpus): query = summary sentence, "
        "document = the rest of the docstring",
        "documents_read": read,
        "usable_pairs": len(pairs),
        **counts,
    }
    return write(select(kept, config), config, built)


def man_pages(man_dir: str, exclude: str = "") -> list[str]:
    """The pages of man1 ... man8, each file once (a link to another listed page left out),
    but those named with an `exclude` prefix, in an order fixed by a hash of the path relative
    to `man_dir`."""
    prefixes = tuple(prefix for prefix in exclude.split(",") if prefix)
    paths = sorted(glob.glob(os.path.join(man_dir, "man[1-8]", "*")))
    paths = [p for p in paths if not (prefixes and os.path.basename(p).startswith(prefixes))]
    real = {os.path.realpath(p) for p in paths if not os.path.islink(p)}
    pages = [p for p in paths if not (os.path.islink(p) and os.path.realpath(p) in real)]
    return sorted(pages, key=lambda p: (_digest(os.path.relpath(p, man_dir), "page"), p))


def _enough(pairs: list[Pair], config: ManFlags) -> bool:
    task = select(dedupe(pairs)[0], config)
    full = len(task["train"]) >= config.max_train
    return full and all(len(task[s]) >= config.max_queries for s in SPLITS)


def build_manpages(config: ManFlags) -> dict:
    pages = man_pages(config.man_dir, config.exclude)
    if len(pages) < config.min_pages:
        raise UserError(
            f"{config.man_dir} holds {len(pages)} manual pages (fewer than {config.min_pages}): "
            "too few for a task; use the docstrings sub-command"
        )
    pairs, read = [], 0
    with ThreadPoolExecutor(config.workers) as pool:
        while read < len(pages) and not _enough(pairs, config):
            batch = pages[read : read + MAN_BATCH]
            for path, page in zip(batch, pool.map(man_task.render, batch)):
                pair = man_pair(page, os.path.relpath(path, config.man_dir), config)
                pairs += [pair] if pair else []
            read += len(batch)
    kept, counts = dedupe(pairs)
    built = {
        "source": "English manual pages: query = NAME's description, document = DESCRIPTION",
        "pages": len(pages),
        "pages_read": read,
        "usable_pairs": len(pairs),
        **counts,
    }
    return write(select(kept, config), config, built)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parsed = flags.parse_command(
        "benchmarks.retrieval_task",
        __doc__.split("\n\n")[0],
        {"docstrings": DocstringFlags, "manpages": ManFlags},
        argv,
    )
    if parsed is None:
        return 2
    command, config = parsed
    run = build_docstrings if command == "docstrings" else build_manpages
    return run_cli(lambda: print(json.dumps(run(config), indent=1)), argv)


if __name__ == "__main__":
    sys.exit(main())
