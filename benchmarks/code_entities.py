"""A token-classification task of real text that needs no download: the code entities that
the authors of Python docstrings marked with Sphinx roles, tagged word by word (IOB2).

    python -m benchmarks.code_entities --output_dir runs/code-entities

The sentences come from the docstrings of every module under `--roots` (default: the running
Python's standard library and site-packages; test folders left out, as
beam_pipelines.demo_corpus walks them). Prose only: doctests, literal blocks after `::`,
directives' bodies and table rules are skipped; a field list's marker (`:param x:`) and a
bullet's are dropped from its text. A sentence starts with a capital letter or markup, ends
with `.`, `!` or `?`, and has `--min_words` to `--max_words` words.

The markup is removed, the displayed text kept and tagged with its type: `:class:` CLASS,
`:func:` FUNC, `:meth:` METH, `:mod:` MOD, `:exc:` EXC, `:attr:`, `:data:` and `:const:` ATTR
(`:py:class:` as `:class:`), double backquotes CODE. `~a.b.C` displays `C`, `!C` displays `C`,
`title <target>` displays the title. Text roles (`:ref:`, `:term:`, `:pep:`...) keep their
displayed text, tagged O. A sentence with any other role (`:math:`, `:obj:`...), a single
backquote (default role, link) or unclosed markup is left out. Words are split at whitespace,
punctuation split off as its own tokens (a dotted name, a number and a hyphenated word are one).

A hash of a module's path (relative to its root) puts all of its sentences in one of train,
dev and test; a sentence given twice is kept once (in the first module, by path). Each split
keeps sentences with at least one role's entity (CODE alone, far more common, does not
count: such sentences are left out) and a share (`--plain_share`) without any entity, chosen by
a hash of the text, up to `--max_train` / `--max_eval` sentences. Writes `train.conll`,
`dev.conll`, `test.conll` (`word TAG`, a blank line between sentences; read by
trainer.tasks.tagging) and `task.json` (counts per split and type). Same input, same bytes.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import hashlib
import json
import os
import re
import sys
import sysconfig

from beam_pipelines.demo_corpus import python_files
from common import flags, fs
from common.errors import UserError, run_cli
from common.flags import flag
from trainer.tasks.pairs import text_key

SPLITS = ("train", "dev", "test")
TYPES = {
    "class": "CLASS",
    "func": "FUNC",
    "meth": "METH",
    "mod": "MOD",
    "exc": "EXC",
    "attr": "ATTR",
    "data": "ATTR",
    "const": "ATTR",
}
TEXT_ROLES = {
    "ref", "term", "doc", "envvar", "option", "program", "file", "samp", "kbd", "abbr",
    "command", "dfn", "guilabel", "menuselection", "mimetype", "manpage",
}  # fmt: skip
NUMBERED = {"pep": "PEP", "rfc": "RFC"}
CODE = "CODE"
MARKUP = re.compile(r":(?:\w+:)?(?P<role>\w+):`(?P<target>[^`]+)`|``(?P<code>[^`]+?)``")
TITLED = re.compile(r"(?s)(?P<title>.*\S)\s*<[^<>]+>")
TOKEN = re.compile(r"\w+(?:[-.'\u2019/]\w+)*|\S")
SLOT = re.compile(r"\x00(\d+)\x00")
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z\x00\"'(])")
ABBREVIATIONS = {"e.g.", "i.e.", "etc.", "cf.", "vs.", "viz.", "approx.", "resp.", "no.", "fig."}
# A line's marker, dropped from its text: a field (`:param x:`), a bullet, a Google-style
# argument (`x (int):`).
MARKER = re.compile(
    r":[^:`\s][^:`]*:(?:\s+|$)|(?:[-*+\u2022]|\d+[.)]|#\.)\s+|\*{0,2}\w+(?: \([^()]*\))?:\s+"
)
SKIPPED_BLOCK = (">>>", "..", "+-", "==", "--", "|")
ADMONITIONS = re.compile(r"\.\. (note|warning|versionadded|versionchanged|deprecated|tip|hint)::")
ENDS = {".", "!", "?"}


@dataclasses.dataclass
class Flags:
    output_dir: str = flag("Where train/dev/test.conll and task.json go.", required=True)
    roots: str = flag(
        "Folders of Python modules, comma-separated; default the standard library and "
        "site-packages of the running Python."
    )
    max_train: int = flag("At most this many training sentences.", 3000, minimum=1)
    max_eval: int = flag("At most this many dev and this many test sentences.", 500, minimum=1)
    plain_share: float = flag(
        "Share of each split's sentences without an entity.", 0.2, minimum=0.0, less_than=1.0
    )
    dev_share: float = flag("Share of the modules in dev.", 0.1, greater_than=0.0, less_than=0.5)
    test_share: float = flag("Share of the modules in test.", 0.1, greater_than=0.0, less_than=0.5)
    min_words: int = flag("Sentences with fewer words are left out.", 4, minimum=1)
    max_words: int = flag("Sentences with more words are left out.", 60, minimum=2)

    def __post_init__(self):
        if problem := flags.out_of_bounds(type(self), self):
            raise UserError(problem)


def _digest(text: str, salt: str = "") -> int:
    data = (salt + text).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def _skip_until(stripped: str, depth: int):
    """What a line starting a skipped region skips: ("blank", depth) after a doctest line,
    ("deeper", depth) after `::` or a directive other than an admonition; else None."""
    if stripped.startswith(">>>"):
        return ("blank", depth)
    if stripped.endswith("::") or (stripped.startswith("..") and not ADMONITIONS.match(stripped)):
        return ("deeper", depth)
    return None


def _skipped(skip, stripped: str, depth: int) -> bool:
    if skip[0] == "blank":
        return bool(stripped)
    return not stripped or depth > skip[1]


def _joins(state: tuple, stripped: str, depth: int) -> bool:
    """Whether a line continues the block: the block's indentation, or (after a field's or
    bullet's marker) any deeper one, which then becomes the block's."""
    indent, base = state
    return bool(stripped) and (
        depth == indent or (indent is None and base is not None and depth > base)
    )


def blocks(doc: str) -> list[str]:
    """The prose blocks of a docstring: runs of lines of one indentation, a field's or bullet's
    marker starting a block of its own, literal and doctest regions left out."""
    found, current, state, skip = [], [], (None, None), None
    for line in [*doc.replace("\x00", " ").splitlines(), ""]:
        stripped, depth = line.strip(), len(line) - len(line.lstrip())
        if skip and _skipped(skip, stripped, depth):
            continue
        marker = MARKER.match(stripped)
        if marker or stripped.startswith(SKIPPED_BLOCK) or not _joins(state, stripped, depth):
            found.append(" ".join(current))
            current, state = [], ((None, depth) if marker else (depth, None))
            stripped = stripped[marker.end() :] if marker else stripped
        elif state[0] is None:
            state = (depth, None)
        skip = _skip_until(stripped, depth)
        if stripped and not stripped.startswith(SKIPPED_BLOCK):
            current.append(stripped)
        if skip:
            found.append(" ".join(current))
            current, state = [], (None, None)
    return [" ".join(block.split()) for block in found if block.strip()]


def display(role: str, target: str) -> tuple[str, str] | None:
    """(displayed text, type or "O") of a role's markup; None for a role not read here."""
    target = target.strip()
    titled = TITLED.fullmatch(target)
    if role in NUMBERED:
        return f"{NUMBERED[role]} {target}", "O"
    if role in TEXT_ROLES:
        return (titled.group("title") if titled else target), "O"
    if role not in TYPES:
        return None
    if titled:
        return titled.group("title"), TYPES[role]
    if len(target.split()) != 1:  # no Python name: markup left open before another's
        return None
    if target.startswith("!"):
        target = target[1:]
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return target, TYPES[role]


def _masked(block: str) -> tuple[str, list]:
    """The block with each markup replaced by a slot, and the slots' (text, type), None for a
    role not read here."""
    slots = []

    def slot(match) -> str:
        if match.group("code") is not None:
            shown = (match.group("code"), CODE)
        else:
            shown = display(match.group("role"), match.group("target"))
        slots.append(shown)
        return f"\x00{len(slots) - 1}\x00"

    return MARKUP.sub(slot, block), slots


def split_sentences(masked: str) -> list[str]:
    """Sentences of a masked block: a break after `.`, `!` or `?` before a capital, a quote,
    a bracket or markup, not after an abbreviation."""
    found, start = [], 0
    for match in SENTENCE_BREAK.finditer(masked):
        last = masked[start : match.start()].rsplit(None, 1)[-1].lower()
        if last not in ABBREVIATIONS:
            found.append(masked[start : match.start()])
            start = match.end()
    return [*found, masked[start:]]


def tag(sentence: str, slots: list) -> tuple[list, list] | None:
    """(words, IOB2 tags) of a masked sentence; None when it holds markup not read."""
    words, tags = [], []
    pieces = SLOT.split(sentence)
    for place, piece in enumerate(pieces):
        if place % 2 == 0:
            if "`" in piece or "::" in piece:
                return None
            found = TOKEN.findall(piece)
            words, tags = words + found, tags + ["O"] * len(found)
            continue
        if slots[int(piece)] is None:
            return None
        text, kind = slots[int(piece)]
        found = TOKEN.findall(text)
        words += found
        tags += [kind if kind == "O" else f"{'I' if i else 'B'}-{kind}" for i in range(len(found))]
    return words, tags


def _prose(words: list, sentence: str, config: Flags) -> bool:
    first = sentence.lstrip()[:1]
    try:
        sentence.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from an escape in a docstring
        return False
    return (
        config.min_words <= len(words) <= config.max_words
        and (first.isupper() or first == "\x00")
        and words[-1] in ENDS
    )


def sentences(doc: str, config: Flags):
    """(words, tags) of each usable sentence of a docstring, in order."""
    for block in blocks(doc):
        masked = _masked(block)
        for sentence in split_sentences(masked[0]):
            tagged = tag(sentence, masked[1])
            if tagged and _prose(tagged[0], sentence, config):
                yield tagged


def docstrings(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError, RecursionError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc


def split_of(module: str, config: Flags) -> str:
    point = _digest(module, "split") % 10_000 / 10_000
    if point < config.dev_share:
        return "dev"
    return "test" if point < config.dev_share + config.test_share else "train"


def roots_of(config: Flags) -> list[str]:
    if not config.roots:
        return [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]]
    roots = [root for root in config.roots.split(",") if root]
    for root in roots:
        if not os.path.isdir(root):
            raise UserError(f"--roots: {root} is not a folder")
    return roots


def collect(config: Flags) -> tuple[dict, collections.Counter]:
    """{split: [(words, tags)]} of every module's sentences, each sentence once."""
    found, seen, counts = {s: [] for s in SPLITS}, set(), collections.Counter()
    roots = roots_of(config)
    for root in roots:
        for path in python_files([root]):
            module = os.path.relpath(path, root)
            counts["modules"] += 1
            split = split_of(module, config)
            for doc in docstrings(path):
                for words, tags in sentences(doc, config):
                    key = text_key(" ".join(words))
                    if key in seen:
                        counts["repeated sentences"] += 1
                        continue
                    seen.add(key)
                    found[split].append((words, tags))
    return found, counts


def kind(tags: list) -> str:
    """ "roles" (a role's entity: CLASS ... ATTR), "code" (CODE only) or "plain" (no entity)."""
    types = {t[2:] for t in tags if t != "O"}
    return "roles" if types - {CODE} else "code" if types else "plain"


def choose(rows: list, cap: int, share: float) -> list:
    """Up to `cap` rows: those with a role's entity and `share` without any entity (CODE alone
    is neither: left out), chosen and ordered by a hash of the text."""
    order = sorted(rows, key=lambda row: (_digest(" ".join(row[0])), row))
    marked = [row for row in order if kind(row[1]) == "roles"]
    plain = [row for row in order if kind(row[1]) == "plain"]
    take_marked = min(len(marked), cap - min(len(plain), round(cap * share)))
    take_plain = min(len(plain), round(take_marked * share / (1 - share)), cap - take_marked)
    kept = marked[:take_marked] + plain[:take_plain]
    return sorted(kept, key=lambda row: (_digest(" ".join(row[0])), row))


def conll(rows: list) -> bytes:
    lines = ["\n".join(f"{w} {t}" for w, t in zip(*row)) + "\n" for row in rows]
    return "\n".join(lines).encode("utf-8")


def summary(rows: list) -> dict:
    entities = collections.Counter(t[2:] for _, tags in rows for t in tags if t.startswith("B-"))
    return {
        "sentences": len(rows),
        "with_entities": sum(kind(tags) == "roles" for _, tags in rows),
        "words": sum(len(words) for words, _ in rows),
        "entities": dict(sorted(entities.items())),
    }


def build(config: Flags) -> dict:
    found, counts = collect(config)
    candidates = {
        split: dict(sorted(collections.Counter(kind(tags) for _, tags in found[split]).items()))
        for split in SPLITS
    }
    result = {"candidates": candidates, **counts}
    for split in SPLITS:
        cap = config.max_train if split == "train" else config.max_eval
        rows = choose(found[split], cap, config.plain_share)
        if not rows:
            raise UserError(f"no {split} sentences with markup under {roots_of(config)}")
        fs.write_bytes(fs.join(config.output_dir, f"{split}.conll"), conll(rows))
        result[split] = summary(rows)
    recorded = {k: v for k, v in dataclasses.asdict(config).items() if k != "output_dir"}
    document = {**result, "flags": recorded}
    fs.write_bytes(
        fs.join(config.output_dir, "task.json"),
        (json.dumps(document, indent=1) + "\n").encode("utf-8"),
    )
    return result


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    config = flags.parse(parser, Flags, argv)
    return run_cli(lambda: print(json.dumps(build(config), indent=1)), argv)


if __name__ == "__main__":
    sys.exit(main())
