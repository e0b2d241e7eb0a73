"""Exact deduplication in Beam, across all input files and splits: documents with the same
normalised text are kept once, whatever split each copy carries (a removed copy is counted in
its own). (`--dedup near` runs this, then beam_pipelines/near_dedup.py; each removal is
counted under its kind.)

Normalisation: the invisible format characters U+200B (zero-width space), U+00AD (soft
hyphen), U+FEFF (zero-width no-break space / byte-order mark, anywhere in the text) and
U+2060 (word joiner) removed, then Unicode NFKC (compatibility forms folded: full-width
letters, ligatures), then `str.casefold`, then every run of whitespace collapsed to one
space and the ends stripped. (Joiners that change how a text renders, U+200C/U+200D,
stay.) Two documents are copies when the 128-bit BLAKE2b hashes of their normalised texts
are equal (the chance of any collision among a billion documents is ~1e-21).

Which copy survives: the one first in the input, by `documents.position` (source path, then
byte offset or line), whatever split it carries; so a rerun keeps the same copies. The
grouping is Beam's own `CombinePerKey` (combiner lifting: each worker merges the copies it
holds before the shuffle, so a document in a million copies moves one accumulator per
worker, not a million documents; an accumulator is one document, counts, and at most
`sample_size` excerpts, however many copies there are: no hot key).

Local runs take beam_pipelines/local/exact_dedup.py instead (Beam's local runners hold a grouping
in memory): the same decisions, from keys sorted on disk and a second read of the input.
"""

from __future__ import annotations

import unicodedata
from collections import Counter

import apache_beam as beam

from beam_pipelines import hashing
from beam_pipelines.accounting import STATS, emit_stats, removal_key
from beam_pipelines.documents import (
    EXCERPT_CHARS,
    REMOVED,
    Document,
    Removed,
    doc_position,
    ref,
    split_of,
)

MODES = ("none", "exact", "near")  # the values of --dedup

BLANK = "blank"  # blank documents skip the dedup: the tokenizer counts them as empty


# Characters that render as nothing: copies that differ only by them are the same text.
INVISIBLE = dict.fromkeys(map(ord, "\u200b\u00ad\ufeff\u2060"))


def normalise(text: str) -> str:
    """The text two copies share: invisible characters removed, NFKC, casefolded,
    whitespace runs as one space, stripped."""
    return " ".join(unicodedata.normalize("NFKC", text.translate(INVISIBLE)).casefold().split())


def exact_key(text: str) -> bytes:
    return hashing.digest(normalise(text).encode("utf-8", "surrogatepass"), 16)


def to_tuple(doc: Document) -> tuple:
    """A Document as plain values (Beam's fast coder encodes tuples of str/int/None)."""
    return (doc.source, doc.line, doc.text, doc.split, doc.offset)


class KeyByText(beam.DoFn):
    """Document -> (exact_key, entry) with entry = (position, split, document tuple); blank
    documents go to BLANK untouched."""

    def process(self, doc: Document):
        if not doc.text.strip():
            yield beam.pvalue.TaggedOutput(BLANK, doc)
            return
        entry = (doc_position(doc), split_of(doc), to_tuple(doc))
        yield exact_key(doc.text), entry


def _order(entry: tuple) -> tuple:
    return entry[0], entry[2][2]  # position, then text: a total order even on equal positions


class KeepFirst(beam.CombineFn):
    """Copies of one document -> [the first copy's entry, {split: copies removed},
    [(position, split, excerpt) of the first `sample_size` removed copies]]."""

    def __init__(self, sample_size: int):
        self.sample_size = sample_size

    def create_accumulator(self):
        return [None, {}, []]

    def _remove(self, acc, entry):
        position, split, doc = entry
        acc[1][split] = acc[1].get(split, 0) + 1
        if self.sample_size:
            acc[2].append((position, split, doc[2][:EXCERPT_CHARS]))
            if len(acc[2]) > 2 * self.sample_size:
                acc[2] = sorted(acc[2])[: self.sample_size]

    def add_input(self, acc, entry):
        best = acc[0]
        if best is None:
            acc[0] = entry
        elif _order(entry) < _order(best):
            acc[0] = entry
            self._remove(acc, best)
        else:
            self._remove(acc, entry)
        return acc

    def merge_accumulators(self, accumulators):
        merged = self.create_accumulator()
        for best, counts, sample in accumulators:
            for split, n in counts.items():
                merged[1][split] = merged[1].get(split, 0) + n
            merged[2].extend(sample)
            if best is not None:
                self.add_input(merged, best)
        merged[2] = sorted(merged[2])[: self.sample_size]
        return merged

    def extract_output(self, acc):
        acc[2] = sorted(acc[2])[: self.sample_size]
        return acc


def copy_removed(position: tuple, excerpt: str, kept: tuple, kind: str = "exact") -> Removed:
    place = ref(kept)
    return Removed(
        f"duplicate_{kind}",
        position,
        f"same normalised text as {place['source']}:{place['line']}"
        + ("" if place["offset"] is None else f" (byte {place['offset']})"),
        excerpt,
        kept=kept,
    )


class EmitFirstCopies(beam.DoFn):
    """(key, KeepFirst's output) -> the kept Document (main), a `Removed` per sampled copy
    (REMOVED), and the copies removed per split (STATS)."""

    def __init__(self, kind: str = "exact"):
        self.kind = kind

    def start_bundle(self):
        self.stats = Counter()

    def process(self, element):
        _, (best, counts, sample) = element
        yield Document(*best[2])
        for split, n in counts.items():
            self.stats[removal_key(split, "documents_duplicate", self.kind)] += n
        for position, _, excerpt in sample:
            yield beam.pvalue.TaggedOutput(
                REMOVED, copy_removed(position, excerpt, best[0], self.kind)
            )

    def finish_bundle(self):
        yield from emit_stats(self.stats)


class ExactDedup(beam.PTransform):
    """Documents -> `(docs, removed, stats)`: each normalised text once (its first copy),
    `Removed` records for at most `sample_size` copies per text, and the counts.

    Args:
        sample_size: copies of one text kept as `Removed` samples.
    """

    def __init__(self, sample_size: int = 20):
        super().__init__()
        self.sample_size = sample_size

    def expand(self, docs):
        keyed = docs | "KeyByText" >> beam.ParDo(KeyByText()).with_outputs(BLANK, main="keyed")
        firsts = (
            keyed.keyed
            | "KeepFirstCopy" >> beam.CombinePerKey(KeepFirst(self.sample_size))
            | "EmitFirstCopies"
            >> beam.ParDo(EmitFirstCopies("exact")).with_outputs(REMOVED, STATS, main="docs")
        )
        kept = (keyed[BLANK], firsts.docs) | "WithBlank" >> beam.Flatten()
        return kept, firsts[REMOVED], firsts[STATS]
