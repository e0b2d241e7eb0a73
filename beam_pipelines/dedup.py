"""Deduplication in Beam, across all input files and splits, before the split is chosen:
`ExactDedup` keeps documents with the same normalised text once; `NearDedup` (MinHash and
LSH banding, beam_pipelines/minhash.py) then removes documents that are near copies of an
earlier one. `--dedup near` runs both, and counts each removal under its kind.

Normalisation: Unicode NFKC (compatibility forms folded: full-width letters, ligatures),
then `str.casefold`, then every run of whitespace collapsed to one space and the ends
stripped. Two documents are copies when the 128-bit BLAKE2b hashes of their normalised
texts are equal (the chance of any collision among a billion documents is ~1e-21).

Which copy survives: the one first in the input, by `cleaning.position` (source path, then
byte offset or line), whatever split it would go to; so a rerun keeps the same copies. The
grouping is Beam's own `CombinePerKey` (combiner lifting: each worker merges the copies it
holds before the shuffle, so a document in a million copies moves one accumulator per
worker, not a million documents; an accumulator is one document, counts, and at most
`sample_size` excerpts, however many copies there are: no hot key).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections import Counter

import apache_beam as beam

from beam_pipelines import minhash, sources
from beam_pipelines.accounting import RUN_PREFIX, STATS, removal_key
from beam_pipelines.cleaning import (EXCERPT_CHARS, REMOVED, Removed, doc_position, emit_stats,
                                     ref)
from beam_pipelines.tokenization import split_of

BLANK = "blank"  # blank documents skip the dedup: the tokenizer counts them as empty


def normalise(text: str) -> str:
    """The text two copies share: NFKC, casefolded, whitespace runs as one space, stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def exact_key(text: str) -> bytes:
    return hashlib.blake2b(normalise(text).encode("utf-8", "surrogatepass"),
                           digest_size=16).digest()


def to_tuple(doc: sources.Document) -> tuple:
    """A Document as plain values (Beam's fast coder encodes tuples of str/int/None)."""
    return (doc.source, doc.line, doc.text, doc.split, doc.offset)


class KeyByText(beam.DoFn):
    """Document -> (exact_key, entry) with entry = (position, split, document tuple); blank
    documents go to BLANK untouched."""

    def __init__(self, validation_fraction=0.0, test_fraction=0.0):
        self.fractions = (validation_fraction, test_fraction)

    def process(self, doc: sources.Document):
        if not doc.text.strip():
            yield beam.pvalue.TaggedOutput(BLANK, doc)
            return
        entry = (doc_position(doc), split_of(doc, *self.fractions), to_tuple(doc))
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


class EmitFirstCopies(beam.DoFn):
    """(key, KeepFirst's output) -> the kept Document (main), a `Removed` per sampled copy
    (REMOVED), and the copies removed per split (STATS)."""

    def __init__(self, kind: str = "exact"):
        self.kind = kind

    def start_bundle(self):
        self.stats = Counter()

    def process(self, element):
        _, (best, counts, sample) = element
        yield sources.Document(*best[2])
        for split, n in counts.items():
            self.stats[removal_key(split, "documents_duplicate", self.kind)] += n
        kept = ref(best[0])
        for position, _, excerpt in sample:
            yield beam.pvalue.TaggedOutput(REMOVED, Removed(
                f"duplicate_{self.kind}", position,
                f"same normalised text as {kept['source']}:{kept['line']}"
                + ("" if kept["offset"] is None else f" (byte {kept['offset']})"),
                excerpt, kept=best[0]))

    def finish_bundle(self):
        yield from emit_stats(self.stats)


class ExactDedup(beam.PTransform):
    """Documents -> `(docs, removed, stats)`: each normalised text once (its first copy),
    `Removed` records for at most `sample_size` copies per text, and the counts."""

    def __init__(self, validation_fraction=0.0, test_fraction=0.0, sample_size: int = 20):
        super().__init__()
        self.fractions, self.sample_size = (validation_fraction, test_fraction), sample_size

    def expand(self, docs):
        keyed = docs | "KeyByText" >> beam.ParDo(KeyByText(*self.fractions)).with_outputs(
            BLANK, main="keyed")
        firsts = (keyed.keyed
                  | "KeepFirstCopy" >> beam.CombinePerKey(KeepFirst(self.sample_size))
                  | "EmitFirstCopies" >> beam.ParDo(EmitFirstCopies("exact")).with_outputs(
                      REMOVED, STATS, main="docs"))
        kept = (keyed[BLANK], firsts.docs) | "WithBlank" >> beam.Flatten()
        return kept, firsts[REMOVED], firsts[STATS]


BY_POSITION = "by_position"


class MinHashBands(beam.DoFn):
    """Document -> (band key, (position, signature bytes)) per LSH band (main), and
    (position, document tuple) (BY_POSITION); blank documents go to BLANK untouched."""

    def __init__(self, config: minhash.MinHashConfig):
        self.config = config

    def process(self, doc: sources.Document):
        if not doc.text.strip():
            yield beam.pvalue.TaggedOutput(BLANK, doc)
            return
        position = doc_position(doc)
        sig = minhash.signature(normalise(doc.text).split(), self.config)
        member = (position, sig.tobytes())
        for key in minhash.band_keys(sig, self.config):
            yield key, member
        yield beam.pvalue.TaggedOutput(BY_POSITION, (position, to_tuple(doc)))


class FirstMembers(beam.CombineFn):
    """The members of one LSH bucket -> (how many, the first `cap` in input order). A
    bucket of a million look-alikes costs each worker `cap` members, never a hot key."""

    def __init__(self, cap: int):
        self.cap = cap

    def create_accumulator(self):
        return [0, []]

    def add_input(self, acc, member):
        acc[0] += 1
        acc[1].append(member)
        if len(acc[1]) > 2 * self.cap:
            acc[1] = sorted(acc[1])[: self.cap]
        return acc

    def merge_accumulators(self, accumulators):
        count, members = 0, []
        for n, some in accumulators:
            count, members = count + n, members + list(some)
        return [count, sorted(members)[: self.cap]]

    def extract_output(self, acc):
        return acc[0], sorted(acc[1])[: self.cap]


class MatchInBuckets(beam.DoFn):
    """(band key, (count, members)) -> (position, (earlier position, estimated Jaccard)) for
    members that match an earlier member; over-full buckets counted (STATS, run-wide)."""

    def __init__(self, config: minhash.MinHashConfig):
        self.config = config

    def start_bundle(self):
        self.stats = Counter()

    def process(self, element):
        _, (count, members) = element
        if count > self.config.near_max_bucket:
            self.stats[RUN_PREFIX + "near_buckets_capped"] += 1
            self.stats[RUN_PREFIX + "near_bucket_members_unchecked"] += (
                count - self.config.near_max_bucket)
        if len(members) > 1:
            for position, earlier, jaccard in minhash.earlier_matches(
                    members, self.config.near_threshold):
                yield position, (earlier, jaccard)

    def finish_bundle(self):
        yield from emit_stats(self.stats)


class DropMatched(beam.DoFn):
    """(position, {"doc": [document], "match": [(earlier, jaccard)]}) -> the document if it
    matched nothing earlier (main), else a `Removed` (REMOVED) and a count (STATS)."""

    def __init__(self, validation_fraction=0.0, test_fraction=0.0):
        self.fractions = (validation_fraction, test_fraction)

    def start_bundle(self):
        self.stats = Counter()

    def process(self, element):
        position, grouped = element
        doc = sources.Document(*next(iter(grouped["doc"])))
        matches = list(grouped["match"])
        if not matches:
            yield doc
            return
        earlier, jaccard = min(matches)
        self.stats[removal_key(split_of(doc, *self.fractions), "documents_duplicate",
                               "near")] += 1
        place = ref(earlier)
        yield beam.pvalue.TaggedOutput(REMOVED, Removed(
            "duplicate_near", position,
            f"estimated Jaccard {jaccard:.2f} with the earlier {place['source']}:"
            f"{place['line']}" + ("" if place["offset"] is None else
                                  f" (byte {place['offset']})"),
            doc.text[:EXCERPT_CHARS], kept=earlier))

    def finish_bundle(self):
        yield from emit_stats(self.stats)


class NearDedup(beam.PTransform):
    """Documents -> `(docs, removed, stats)`: a document is removed when some document
    earlier in the input (by `cleaning.position`) shares an LSH bucket with it and their
    signatures agree on at least `near_threshold` of their values. One pass, no all-pairs
    step and no iteration: the decision depends only on the two documents, so reruns agree.
    (Unlike connected components, in a chain A ~ B ~ C where A and C are not alike, B and C
    both go; A stays.)"""

    def __init__(self, config: minhash.MinHashConfig, validation_fraction=0.0,
                 test_fraction=0.0):
        super().__init__()
        self.config, self.fractions = config, (validation_fraction, test_fraction)

    def expand(self, docs):
        banded = docs | "MinHashBands" >> beam.ParDo(MinHashBands(self.config)).with_outputs(
            BLANK, BY_POSITION, main="bands")
        cap = self.config.near_max_bucket
        matched = (banded.bands
                   | "FirstMembers" >> beam.CombinePerKey(FirstMembers(cap))
                   | "MatchInBuckets" >> beam.ParDo(MatchInBuckets(self.config)).with_outputs(
                       STATS, main="matches"))
        earliest = matched.matches | "EarliestMatch" >> beam.CombinePerKey(min)
        kept = ({"doc": banded[BY_POSITION], "match": earliest}
                | "JoinMatches" >> beam.CoGroupByKey()
                | "DropMatched" >> beam.ParDo(DropMatched(*self.fractions)).with_outputs(
                    REMOVED, STATS, main="docs"))
        docs = (banded[BLANK], kept.docs) | "WithBlankNear" >> beam.Flatten()
        stats = (matched[STATS], kept[STATS]) | "NearStats" >> beam.Flatten()
        return docs, kept[REMOVED], stats
