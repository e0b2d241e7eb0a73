"""Word-level tagged data for token classification (named entities, chunks): CoNLL columns or
JSONL, read into sentences of words and their tags, the label set and the tagging scheme.

- CoNLL columns (`.conll`, `.txt`, `.iob`, `.bio`...): one word a line, its columns separated
  by spaces or tabs; the word is the first column and the tag a chosen one (`tag_column`,
  default -1: the last, as CoNLL-2003's NER tag). A blank line ends a sentence. A
  `-DOCSTART-` line is skipped and ends a sentence, as Hugging Face datasets' conll2003 script
  reads CoNLL-2003 (`line.startswith("-DOCSTART-")`). Every word line of a file must have the
  same number of columns: a line with one fewer would give its tag from another column.
- JSONL (`.jsonl`, `.json`): one sentence a line, `{"tokens": [...], "tags": [...]}` (the
  field names can be chosen); tags as strings, or as integer ids with `label_names` given in
  id order (a Hugging Face ClassLabel's names, e.g. conll2003's `ner_tags`). A line with no
  tokens is skipped and counted.

A tag is `O` or a prefix (B, I, E, S) and a type (`B-PER`); anything else, a tags list whose
length differs from its words, an empty word, a line with too few columns and a file with no
sentence are one `UserError` naming the file and line. The label set is the training split's
tags, sorted with `O` first, so that ids do not depend on the order of the file. A dev or test
tag that training never uses is not an error: it is counted and reported (`unseen_labels`),
its words keep their gold tag (the model, which cannot predict it, is scored as it predicts
there) and get no label id (`IGNORED`).

The scheme (IOB1, IOB2 or BIOES; `SCHEMES`) is given or detected from the training split:
BIOES where an E- or S- tag occurs; else IOB1 where an entity starts with an I- tag (after O or
after another type; IOB1 writes B- only between two adjacent entities of one type, as the
original CoNLL-2003 files do); else IOB2 (every entity starts with B-). It chooses how entities
are scored (`entity_f1`).

Example:
    >>> train = read_tagged("train.conll")                # or train.jsonl
    >>> tagset = label_set(train)                           # scheme detected
    >>> tagset.labels, tagset.scheme
    (('O', 'B-LOC', 'B-PER', 'I-PER'), 'IOB2')
    >>> dev = read_tagged("dev.conll")
    >>> print(unseen_labels(dev, tagset).line())            # when dev has a tag train lacks
    >>> ids = encode_tags(dev, tagset)                      # [[0, 2, 3, 0], ...]; -100 unseen
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re

from common import fs
from common.errors import UserError
from trainer.tasks.datasets import decoded

FORMATS = ("conll", "jsonl")
SCHEMES = ("IOB1", "IOB2", "BIOES")
OUTSIDE = "O"
IGNORED = -100  # the label id of a word piece no loss or score reads (transformers' convention)
DOCSTART = "-DOCSTART-"
_JSONL = (".jsonl", ".json")
TAG_COLUMNS = ("tags", "ner_tags")  # a dataset's tag column when none is named
_CONLL = (".conll", ".conll03", ".txt", ".tsv", ".iob", ".iob1", ".iob2", ".bio")
_CONLL += (".bioes", ".iobes")  # a file named for its scheme
# CoNLL columns are separated by spaces or tabs only: str.split() would also split a word at
# a no-break space or another Unicode space, giving the line an extra column.
_COLUMNS = re.compile(r"[ \t]+")
_TAG = re.compile(r"[BIES]-\S+")


@dataclasses.dataclass
class TaggedSplit:
    """One file's sentences: words, their tags (one a word), and where each sentence is."""

    path: str
    words: list  # per sentence, its words
    tags: list  # per sentence, one tag a word
    lines: list  # per sentence, the line of its first word (JSONL: its line)
    skipped_empty: int = 0  # JSONL lines with no tokens

    def __len__(self) -> int:
        return len(self.words)

    def where(self, index: int) -> str:
        return f"{self.path} line {self.lines[index]}"


@dataclasses.dataclass(frozen=True)
class TagSet:
    """The training split's labels (`O` first, then sorted), the scheme and why it is that."""

    labels: tuple
    scheme: str
    scheme_reason: str  # "given" or what the detection saw

    def index(self) -> dict:
        return {label: i for i, label in enumerate(self.labels)}

    def line(self) -> str:
        return f"{len(self.labels)} labels, scheme {self.scheme} ({self.scheme_reason})"


@dataclasses.dataclass(frozen=True)
class UnseenLabels:
    """Dev or test tags the training split never uses: words per tag, and sentences."""

    path: str
    counts: dict  # tag -> words, sorted by tag
    sentences: int

    @property
    def words(self) -> int:
        return sum(self.counts.values())

    def line(self) -> str:
        if not self.counts:
            return f"{self.path}: every tag occurs in the training split"
        listed = ", ".join(f"{tag} {count}" for tag, count in self.counts.items())
        return (
            f"{self.path}: {self.words} word(s) in {self.sentences} sentence(s) carry tags the "
            f"training split never uses ({listed}): scored as gold, though the model cannot "
            "predict them"
        )

    def to_dict(self) -> dict:
        return {"words": self.words, "sentences": self.sentences, "tags": dict(self.counts)}


def format_of(path: str, declared: str | None = None) -> str:
    """`declared`, else the format its name says; one line when it says none."""
    if declared:
        if declared not in FORMATS:
            raise UserError(f"tagged data format {declared!r} is not one of {', '.join(FORMATS)}")
        return declared
    name = path.lower()
    if name.endswith(_JSONL):
        return "jsonl"
    if name.endswith(_CONLL):
        return "conll"
    raise UserError(
        f"{path}: cannot tell the format from the name; name it .conll (columns) or .jsonl "
        "(tokens and tags), or give the format"
    )


def read_tagged(
    path: str,
    fmt: str | None = None,
    tag_column: int = -1,
    fields: tuple[str, str] = ("tokens", "tags"),
    label_names: tuple | None = None,
) -> TaggedSplit:
    """One local or gs:// file's sentences: CoNLL columns (`tag_column`) or JSONL (`fields`:
    the tokens' and tags' names; `label_names` for integer tags)."""
    if format_of(path, fmt) == "conll":
        return read_conll(path, tag_column)
    return read_jsonl(path, fields, label_names)


def read_conll(path: str, tag_column: int = -1) -> TaggedSplit:
    """CoNLL columns: the first is the word, `tag_column` (0-based; negative from the end)
    its tag; blank and `-DOCSTART-` lines end a sentence."""
    if tag_column == 0:
        raise UserError("the tag column cannot be column 0: that is the word's column")
    split = TaggedSplit(path, [], [], [])
    words, tags, width = [], [], None
    for number, raw in enumerate(decoded(path, fs.read_bytes(path)).split("\n"), start=1):
        line = raw.strip(" \t\r")
        if not line or line.startswith(DOCSTART):
            _close(split, words, tags, number - len(words))
            words, tags = [], []
            continue
        columns = _COLUMNS.split(line)
        width = width or (len(columns), number)
        _check_columns(path, number, columns, tag_column, width)
        words.append(columns[0])
        tags.append(_checked_tag(path, number, columns[tag_column]))
    _close(split, words, tags, number + 1 - len(words))
    _check_not_empty(split)
    return split


def _close(split: TaggedSplit, words: list, tags: list, first_line: int) -> None:
    if words:
        split.words.append(words)
        split.tags.append(tags)
        split.lines.append(first_line)


def _check_columns(path: str, number: int, columns: list, tag_column: int, width: tuple):
    need = tag_column + 1 if tag_column > 0 else max(2, 1 - tag_column)
    if len(columns) < need:
        raise UserError(
            f"{path} line {number}: {len(columns)} column(s) ({' '.join(columns)[:60]!r}); "
            f"a word and its tag in column {tag_column} need {need}"
        )
    count, first = width
    if len(columns) != count:
        raise UserError(
            f"{path} line {number}: {len(columns)} columns, but line {first} has {count}; every "
            "word line needs the same columns (a word with a space inside splits in two)"
        )


def read_jsonl(
    path: str, fields: tuple[str, str] = ("tokens", "tags"), label_names: tuple | None = None
) -> TaggedSplit:
    """One sentence a line: its tokens and tags (strings, or ids into `label_names`)."""
    split = TaggedSplit(path, [], [], [])
    for number, line in enumerate(decoded(path, fs.read_bytes(path)).split("\n"), start=1):
        if line.strip():
            _add_row(split, number, _json_object(path, number, line), fields, label_names)
    _check_not_empty(split)
    return split


def _add_row(split: TaggedSplit, number: int, row: dict, fields: tuple, label_names) -> None:
    """One JSON object (a JSONL line, a dataset's row) as a sentence, or counted empty."""
    path = split.path
    words = _words(path, number, row, fields[0])
    tags = _tags(path, number, row, fields[1], label_names)
    if len(tags) != len(words):
        raise UserError(
            f"{path} line {number}: {len(words)} tokens but {len(tags)} tags; every token "
            "needs one tag"
        )
    if not words:
        split.skipped_empty += 1
        return
    _close(split, words, tags, number)


def from_dataset(label: str, dataset, tokens: str = "tokens", tags: str | None = None):
    """A Hugging Face `datasets.Dataset` split's sentences as a `TaggedSplit` (`label` names it
    in messages, its row numbers as lines): the `tokens` column and the `tags` column, by
    default the first of TAG_COLUMNS it has; tag ids are read through the column's class names
    (conll2003's `ner_tags` is a sequence of ClassLabel)."""
    columns = list(dataset.column_names)
    tags = tags or next((name for name in TAG_COLUMNS if name in columns), None)
    if tokens not in columns or tags not in columns:
        wanted = tokens if tokens not in columns else (tags or " or ".join(TAG_COLUMNS))
        raise UserError(
            f"{label} has no {wanted} column (its columns: {', '.join(columns)}): name the "
            "words' and the tags' columns with --text_column and --label_column"
        )
    names = getattr(getattr(dataset.features[tags], "feature", None), "names", None)
    split = TaggedSplit(label, [], [], [])
    for number, row in enumerate(dataset.select_columns([tokens, tags]).to_list(), start=1):
        _add_row(split, number, row, (tokens, tags), tuple(names) if names else None)
    _check_not_empty(split)
    return split


def _json_object(path: str, number: int, line: str) -> dict:
    try:
        row = json.loads(line)
    except ValueError as err:
        raise UserError(f"{path} line {number} is not JSON: {err}") from None
    if not isinstance(row, dict):
        raise UserError(f"{path} line {number} is not a JSON object")
    return row


def _field(path: str, number: int, row: dict, name: str) -> list:
    value = row.get(name)
    if not isinstance(value, list):
        found = "no such field" if value is None else f"a {type(value).__name__}"
        raise UserError(
            f"{path} line {number}: field {name!r} must be a list ({found}); its fields: "
            f"{', '.join(row) or 'none'}"
        )
    return value


def _words(path: str, number: int, row: dict, name: str) -> list:
    words = []
    for i, token in enumerate(_field(path, number, row, name)):
        word = token.strip() if isinstance(token, str) else ""
        if not word:
            raise UserError(f"{path} line {number}: token {i} is {token!r}; a word cannot be empty")
        words.append(word)
    return words


def _tags(path: str, number: int, row: dict, name: str, label_names: tuple | None) -> list:
    tags = []
    for value in _field(path, number, row, name):
        if isinstance(value, int) and not isinstance(value, bool):
            if not label_names:
                raise UserError(
                    f"{path} line {number}: tag {value} is a number; give the label names in "
                    "id order to read numbered tags"
                )
            if not 0 <= value < len(label_names):
                raise UserError(
                    f"{path} line {number}: tag id {value} is not below the {len(label_names)} "
                    "label names given"
                )
            value = label_names[value]
        if not isinstance(value, str):
            raise UserError(f"{path} line {number}: tag {value!r} is not a string or an id")
        tags.append(_checked_tag(path, number, value.strip()))
    return tags


def _checked_tag(path: str, number: int, tag: str) -> str:
    if tag != OUTSIDE and not _TAG.fullmatch(tag):
        raise UserError(
            f"{path} line {number}: tag {tag!r} is neither O nor a B-, I-, E- or S- prefix and "
            f"a type (schemes {', '.join(SCHEMES)}); is the tag column the right one?"
        )
    return tag


def _check_not_empty(split: TaggedSplit) -> None:
    if not split.words:
        raise UserError(f"{split.path} holds no sentences (no word with a tag)")


def label_set(train: TaggedSplit, scheme: str | None = None) -> TagSet:
    """The training split's tags, `O` first then sorted, and the scheme: `scheme` if given
    (checked against the tags), else detected (`detect_scheme`)."""
    used = {tag for tags in train.tags for tag in tags}
    if used <= {OUTSIDE}:
        raise UserError(f"{train.path}: every word is tagged O; there is no entity to learn")
    labels = ([OUTSIDE] if OUTSIDE in used else []) + sorted(used - {OUTSIDE})
    if scheme is None:
        scheme, reason = detect_scheme(train)
    else:
        reason = "given"
        _check_scheme(train, scheme)
    return TagSet(tuple(labels), scheme, reason)


def _prefixes(tags: list) -> set:
    return {tag[0] for tag in tags if tag != OUTSIDE}


def detect_scheme(split: TaggedSplit) -> tuple[str, str]:
    """(scheme, what showed it): BIOES at the first E- or S- tag, IOB1 at the first entity
    that starts with I-, else IOB2."""
    for i, tags in enumerate(split.tags):
        if _prefixes(tags) & {"E", "S"}:
            return "BIOES", f"detected: E- or S- tags in the sentence at {split.where(i)}"
    for i, tags in enumerate(split.tags):
        previous = OUTSIDE
        for tag in tags:
            if tag.startswith("I-") and (previous == OUTSIDE or previous[2:] != tag[2:]):
                return "IOB1", f"detected: an entity starts with {tag} at {split.where(i)}"
            previous = tag
    return "IOB2", "detected: every entity starts with B-"


def _check_scheme(split: TaggedSplit, scheme: str) -> None:
    if scheme not in SCHEMES:
        raise UserError(f"tag scheme {scheme!r} is not one of {', '.join(SCHEMES)}")
    if scheme == "BIOES":
        return
    for i, tags in enumerate(split.tags):
        if _prefixes(tags) & {"E", "S"}:
            raise UserError(
                f"{split.where(i)}: E- or S- tags, but the scheme given is {scheme}; give "
                "BIOES, or leave the scheme to be detected"
            )


def unseen_labels(split: TaggedSplit, tagset: TagSet) -> UnseenLabels:
    """The tags of `split` that the label set lacks, counted in words and sentences."""
    known = set(tagset.labels)
    counts = collections.Counter()
    sentences = 0
    for tags in split.tags:
        missing = [tag for tag in tags if tag not in known]
        counts.update(missing)
        sentences += bool(missing)
    return UnseenLabels(split.path, dict(sorted(counts.items())), sentences)


def encode_tags(split: TaggedSplit, tagset: TagSet) -> list[list[int]]:
    """Label ids per word; `IGNORED` for a tag the training split never uses."""
    index = tagset.index()
    return [[index.get(tag, IGNORED) for tag in tags] for tags in split.tags]
