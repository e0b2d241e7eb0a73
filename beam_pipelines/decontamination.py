"""Decontamination: corpus documents that share long n-grams with evaluation sets, removed
(or reported) before they are tokenized, per named evaluation set.

    python -m beam_pipelines.prepare --input 'corpus/*.jsonl' --tokenizer TOK --output_dir OUT \\
        --decontaminate 'sst2=glue/SST-2/dev.tsv;mine=task/dev.jsonl,task/test.jsonl'

`--decontaminate NAME=PATH[,PATH...];NAME=...` names each evaluation set (names of letters,
digits, `_` and `-`; paths or globs, local or gs://), read by `eval_files.read_texts`: JSONL,
or TSV/CSV with a header row, every column among `--decontam_columns` that a file has
(default: `DEFAULT_COLUMNS`, which covers trainer.finetune's files, the pairs files and
GLUE's TSVs).

**Normalisation** (`units_of`, the same for evaluation texts and documents): zero-width
characters and soft hyphens removed, Unicode NFKC, casefolded (`dedup.normalise`), every
punctuation and symbol character (Unicode categories P* and S*) replaced by a space, then
word units (`common/word_units.py`: whitespace-separated words; one unit per character in
Chinese, Japanese, Thai and the other scripts written without spaces). So
"The cat's-paw, (NFKC)" and "the cat s paw nfkc" have the same units.

**N-grams.** Every `--decontam_ngram` (n, default 13, as GPT-3 and Dolma) consecutive units of
an evaluation text is one n-gram. A text with fewer than n units but at least
`--decontam_min_words` (default 8) is one n-gram of all its units (matched whole, wherever a
document holds exactly that run of units); shorter texts are skipped and counted (`texts_skipped`).

**The index** (`Index`): the 64-bit hashes of every set's n-grams (`hashing.ngram_hashes`),
sorted and unique, each with a bit mask of the sets that hold it. It is built once on the
launcher, bounded (`MAX_INDEX_NGRAMS` distinct n-grams, 16 bytes each: 80 MB; more is refused
in one line), and handed to the workers as a side input. Each document's n-grams (and the
whole texts' lengths) are hashed and looked up by binary search; a false match needs two
64-bit hashes to agree (odds ~ corpus n-grams × index n-grams / 2**64: 5e-4 for 10**10 × 10**6).

**What happens to a match.** A document with at least one n-gram of a set is contaminated by
it. With `--decontam_action remove` (default) it is not tokenized: counted once, under the first
set (in flag order) it matches, as `{split}/documents_contaminated/{set}` (the accounting's sums
hold with it), and written to the removed sample with rule `contaminated:{set}`. With `report`
it is kept and the same record is written. Either way each set counts the documents that match
it and the n-grams they share (a document matching two sets counts in both). The manifest's
`decontamination` records what was checked (`manifest_record`). The step runs on clean
documents (after the quality filter and dedup: counts of clean text) and before the mixture
and the tokenizer, the same on the local runner and on Dataflow; the removed sample keeps at
most `--removed_sample_size` records per set, the counts are of all.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import unicodedata
from collections import Counter

import apache_beam as beam
import numpy as np

from beam_pipelines import eval_files, hashing, input_spec, mixture
from beam_pipelines.accounting import STATS, emit_stats, removal_key
from beam_pipelines.dedup import normalise
from beam_pipelines.documents import (
    EXCERPT_CHARS,
    REMOVED,
    Document,
    Removed,
    doc_position,
    split_of,
)
from common import flags, word_units
from common.errors import UserError
from common.flags import flag

ACTIONS = ("remove", "report")
# trainer.finetune's columns (text, text_pair), the pairs files' (query, positive), GLUE's TSVs
# (CoLA/SST-2 sentence, MRPC's "#1 String"/"#2 String", QQP question1/2, QNLI question/sentence,
# MNLI/RTE/STS-B/WNLI sentence1/2) and the Hub's GLUE (premise, hypothesis).
DEFAULT_COLUMNS = (
    "text,text_pair,sentence,sentence1,sentence2,question,question1,question2,"
    "#1 String,#2 String,premise,hypothesis,query,positive"
)
MAX_SETS = 64  # a set is one bit of an n-gram's mask
MAX_INDEX_NGRAMS = 5_000_000  # 16 bytes each (hash, mask): 80 MB on every worker
CACHED_UNITS = 200_000  # distinct words whose hashes a worker keeps (~30 MB)
COUNT_PREFIX = "decontam."  # {prefix}{set}.{what} per set, {prefix}{what} for the run
NORMALISATION = (
    "zero-width characters and soft hyphens removed, NFKC, casefolded, Unicode punctuation "
    "and symbols (P*, S*) replaced by spaces, word units of common/word_units.py "
    "(whitespace-separated words; one per character of Chinese, Japanese, Thai ...)"
)


class DecontamError(UserError):
    """A --decontaminate value, or an evaluation set, that cannot be checked against."""


@dataclasses.dataclass(frozen=True)
class DecontamConfig:
    """The flags of decontamination (each one a prepare flag)."""

    decontaminate: str = flag(
        "evaluation sets to remove from the corpus: 'NAME=PATH[,PATH...];NAME=...' "
        "(JSONL, or TSV/CSV with a header; beam_pipelines/decontamination.py)"
    )
    decontam_columns: str = flag(
        "the evaluation files' text columns, comma-separated (those a file has are read)",
        DEFAULT_COLUMNS,
    )
    decontam_ngram: int = flag(
        "n: a document sharing one n-gram of normalised word units with a set is contaminated",
        13,
        minimum=1,
    )
    decontam_min_words: int = flag(
        "evaluation texts shorter than --decontam_ngram but of at least this many units are "
        "matched whole; shorter ones are skipped (counted)",
        8,
        minimum=1,
    )
    decontam_action: str = flag(
        "remove: contaminated documents are not tokenized (counted, sampled); report: kept, "
        "counted and sampled",
        "remove",
        choices=ACTIONS,
    )


@dataclasses.dataclass(frozen=True)
class Index:
    keys: np.ndarray  # sorted unique uint64 n-gram hashes
    masks: np.ndarray  # uint64: bit i set when set i holds the n-gram
    lengths: tuple[int, ...]  # the n-gram lengths documents are hashed at (n, then whole texts')


@dataclasses.dataclass(frozen=True)
class DecontamSpec:
    """The checked flags (`parse`), and once loaded on the launcher (`load`) the index and
    what the manifest records of the sets."""

    sets: tuple[tuple[str, str], ...]  # (name, comma-separated paths or globs), in flag order
    columns: tuple[str, ...]
    ngram: int
    min_words: int
    action: str
    index: Index | None = dataclasses.field(default=None, compare=False, repr=False)
    record: dict = dataclasses.field(default_factory=dict, compare=False)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.sets]


def parse(config: DecontamConfig) -> DecontamSpec | None:
    """The checked spec (one line for a value that cannot work), or None without
    --decontaminate, whose companion flags then must stay at their defaults."""
    if not config.decontaminate:
        if changed := flags.companions_changed(DecontamConfig, config):
            raise DecontamError(f"{', '.join(changed)}: give --decontaminate NAME=PATH too")
        return None
    entries = mixture.named_entries(config.decontaminate, ";", "--decontaminate")
    if not entries:
        raise DecontamError("--decontaminate names no set; give NAME=PATH[,PATH...];NAME=...")
    for name, _ in entries:
        if not mixture.NAME.fullmatch(name):
            raise DecontamError(
                f"--decontaminate name {name!r} may hold only letters, digits, _ and -"
            )
    if len(entries) > MAX_SETS:
        raise DecontamError(f"--decontaminate names {len(entries)} sets; at most {MAX_SETS}")
    columns = tuple(c.strip() for c in config.decontam_columns.split(",") if c.strip())
    if not columns:
        raise DecontamError("--decontam_columns names no column")
    return DecontamSpec(
        tuple(entries),
        columns,
        config.decontam_ngram,
        config.decontam_min_words,
        config.decontam_action,
    )


@functools.cache
def _blanks() -> dict:
    """Every punctuation and symbol character -> a space (built once a process, ~0.5 s)."""
    return {c: " " for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c))[0] in "PS"}


def units_of(text: str) -> list[str]:
    """The normalised word units n-grams are made of (see the module docstring)."""
    return word_units.units(normalise(text).translate(_blanks()))


def text_ngrams(text: str, ngram: int, min_words: int) -> tuple[np.ndarray, int]:
    """(the hashes of an evaluation text's n-grams, their length: n, the text's own length
    when it is matched whole, or 0 when it is too short and skipped)."""
    units = units_of(text)
    length = ngram if len(units) >= ngram else len(units) if len(units) >= min_words else 0
    if not length:
        return np.zeros(0, dtype=np.uint64), 0
    return hashing.ngram_hashes(hashing.unit_hashes(units), length), length


def _set_ngrams(texts, spec: DecontamSpec) -> tuple[np.ndarray, Counter, set]:
    """(one set's unique n-gram hashes, its texts counted by kind, the lengths used)."""
    parts, counts, lengths = [], Counter(), set()
    for text in texts:
        hashes, length = text_ngrams(text, spec.ngram, spec.min_words)
        counts["texts"] += 1
        counts["texts_skipped"] += not length
        counts["texts_whole"] += 0 < length < spec.ngram
        lengths.add(length)
        parts.append(hashes)
    unique = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.uint64)
    return unique, counts, lengths - {0}


def build_index(spec: DecontamSpec, texts: dict) -> tuple[Index, dict]:
    """{set name: texts} -> (the `Index`, {set name: texts, texts_whole, texts_skipped,
    ngrams}); more than `MAX_INDEX_NGRAMS` distinct n-grams is refused in one line."""
    keys, bits, counts, lengths = [], [], {}, {spec.ngram}
    for bit, (name, set_texts) in enumerate(texts.items()):
        unique, counted, used = _set_ngrams(set_texts, spec)
        counts[name] = {**counted, "ngrams": len(unique)}
        keys.append(unique)
        bits.append(np.full(len(unique), 1 << bit, dtype=np.uint64))
        lengths |= used
    merged, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    if len(merged) > MAX_INDEX_NGRAMS:
        raise DecontamError(
            f"the evaluation sets hold {len(merged):,} distinct {spec.ngram}-grams, over the "
            f"index's bound of {MAX_INDEX_NGRAMS:,} (80 MB on every worker); check fewer or "
            "smaller sets"
        )
    masks = np.zeros(len(merged), dtype=np.uint64)
    np.bitwise_or.at(masks, inverse.ravel(), np.concatenate(bits))
    ordered = (spec.ngram, *sorted(lengths - {spec.ngram}, reverse=True))
    return Index(merged, masks, ordered), counts


def load(spec: DecontamSpec) -> DecontamSpec:
    """On the launcher, before anything is written: every set's files listed
    (`input_spec.expand_inputs`: one that does not exist is refused) and read
    (`eval_files.read_texts`: one with no text column, or empty, is refused), the index built,
    and the manifest's record of the sets."""
    files = {
        name: [
            eval_files.read_texts(path, spec.columns)
            for path in input_spec.expand_inputs(globs, f"--decontaminate {name}")
        ]
        for name, globs in spec.sets
    }
    texts = {name: [t for f in found for t in f.texts] for name, found in files.items()}
    index, counts = build_index(spec, texts)
    record = {
        "ngram": spec.ngram,
        "min_words": spec.min_words,
        "normalisation": NORMALISATION,
        "action": spec.action,
        "columns": list(spec.columns),
        "sets": {
            name: {"files": [f.record() for f in found], **counts[name]}
            for name, found in files.items()
        },
    }
    return dataclasses.replace(spec, index=index, record=record)


def loaded(settings):
    """`settings` (`options.Settings`) with its evaluation sets read and indexed (`load`);
    as it is without --decontaminate."""
    if settings.decontamination is None:
        return settings
    return dataclasses.replace(settings, decontamination=load(settings.decontamination))


def matches(text: str, index: Index, num_sets: int, cache: dict | None = None) -> list[int]:
    """How many of the document's n-grams (at every length of the index) each set holds;
    `cache`: the units' hashes seen so far (`hashing.unit_hashes`)."""
    found = np.zeros(num_sets, dtype=np.int64)
    if not len(index.keys):
        return found.tolist()
    hashes = hashing.unit_hashes(units_of(text), cache)
    for length in index.lengths:
        grams = hashing.ngram_hashes(hashes, length)
        at = np.minimum(np.searchsorted(index.keys, grams), len(index.keys) - 1)
        hit = index.masks[at][index.keys[at] == grams]
        for bit in range(num_sets) if len(hit) else ():
            found[bit] += np.count_nonzero(hit & np.uint64(1 << bit))
    return found.tolist()


def count_key(name: str | None, what: str) -> str:
    """The counter of `what` ("documents", "ngrams") for one set, or for the run (None)."""
    return f"{COUNT_PREFIX}{name}.{what}" if name else f"{COUNT_PREFIX}{what}"


class FindContamination(beam.DoFn):
    """Document (with the side input `index`) -> the document when no set holds any of its
    n-grams, or with --decontam_action report; else a `Removed` (REMOVED) and its counts
    (STATS). Blank documents pass uncounted (the tokenizing step counts them as empty)."""

    def __init__(self, names: list[str], action: str):
        self.names, self.action = names, action

    def setup(self):
        self.cache = {}  # unit -> its hash: ~150 bytes an entry, emptied at CACHED_UNITS

    def start_bundle(self):
        self.stats = Counter()
        if len(self.cache) > CACHED_UNITS:
            self.cache.clear()

    def process(self, doc: Document, index: Index):
        if not doc.text.strip():
            yield doc
            return
        found = matches(doc.text, index, len(self.names), self.cache)
        hit = [(name, k) for name, k in zip(self.names, found) if k]
        if not hit:
            yield doc
            return
        self.stats[count_key(None, "documents")] += 1
        for name, k in hit:
            self.stats[count_key(name, "documents")] += 1
            self.stats[count_key(name, "ngrams")] += k
        reason = "shares " + ", ".join(f"{k:,} n-gram(s) with {name}" for name, k in hit)
        if self.action == "remove":
            self.stats[removal_key(split_of(doc), "documents_contaminated", hit[0][0])] += 1
        else:
            reason += "; kept (--decontam_action report)"
            yield doc
        yield beam.pvalue.TaggedOutput(
            REMOVED,
            Removed(
                f"contaminated:{hit[0][0]}", doc_position(doc), reason, doc.text[:EXCERPT_CHARS]
            ),
        )

    def finish_bundle(self):
        yield from emit_stats(self.stats)


class Decontaminate(beam.PTransform):
    """Clean documents -> `(docs, removed, stats, record)`: the documents to tokenize, the
    `Removed` records of contaminated ones, (name, count) pairs, and the one-element
    PCollection of the sets' record (the commit completes it: `manifest_record`).

    Args:
        spec: the loaded spec (`load`).
    """

    def __init__(self, spec: DecontamSpec):
        super().__init__()
        self.spec = spec

    def expand(self, docs):
        p = docs.pipeline
        index = p | "DecontamIndex" >> beam.Create([self.spec.index])
        found = docs | "FindContamination" >> beam.ParDo(
            FindContamination(self.spec.names, self.spec.action),
            index=beam.pvalue.AsSingleton(index),
        ).with_outputs(REMOVED, STATS, main="docs")
        record = p | "DecontamRecord" >> beam.Create([self.spec.record])
        return found.docs, found[REMOVED], found[STATS], record


def manifest_record(record: dict, stats: dict) -> dict:
    """The manifest's `decontamination`: n, normalisation, action, columns, and per set its
    files (path, sha256, bytes, texts), texts read, matched whole and skipped, distinct
    n-grams, and the documents that matched it and the n-grams they share; for the run the
    documents matched (any set) and removed."""
    sets = {
        name: entry
        | {
            "documents_matched": int(stats.get(count_key(name, "documents"), 0)),
            "ngrams_matched": int(stats.get(count_key(name, "ngrams"), 0)),
        }
        for name, entry in record["sets"].items()
    }
    removed = sum(int(n) for k, n in stats.items() if "/documents_contaminated/" in k)
    matched = int(stats.get(count_key(None, "documents"), 0))
    return record | {"sets": sets, "documents_matched": matched, "documents_removed": removed}
