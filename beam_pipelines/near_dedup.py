"""Near deduplication in Beam: MinHash signatures and LSH banding (beam_pipelines/minhash.py)
over the documents that exact dedup kept, across all inputs and splits (a removed one is
counted in the split it carries).

    docs -> MinHashBands -> (band, band hash): CombinePerKey(FirstMembers) -> MatchInBuckets
         -> (position, earliest match): CombinePerKey(min) -> CoGroupByKey with the documents
         -> DropMatched -> docs

A document is removed when some document earlier in the input (by `documents.position`)
shares an LSH bucket with it and their signatures agree on at least `--near_threshold` of
their values. One pass, no all-pairs step and no iteration; each decision depends only on
the two documents, so reruns and runners agree. (Unlike connected components, in a chain
A ~ B ~ C where A and C are not alike, B and C both go and A stays; a document is never
removed for resembling only later ones.) A bucket compares at most `--near_max_bucket`
members, the first in input order, gathered by a combiner: a bucket of a million look-alikes
is no hot key, and what it did not compare is counted (`near_buckets_capped`,
`near_bucket_members_unchecked` in the manifest's run accounting).

Cost: each document's signature (448 bytes at 112 permutations) travels once per band to
its buckets, and the documents are grouped by position once more to drop the matched ones.
Local runs take beam_pipelines/local/near_dedup.py instead (Beam's local runners hold a
grouping in memory): the same decisions, from band keys sorted on disk and a third read.
"""

from __future__ import annotations

from collections import Counter

import apache_beam as beam

from beam_pipelines import minhash
from beam_pipelines.accounting import RUN_PREFIX, STATS, emit_stats, removal_key
from beam_pipelines.dedup import BLANK, to_tuple
from beam_pipelines.documents import (
    EXCERPT_CHARS,
    REMOVED,
    Document,
    Removed,
    doc_position,
    ref,
    split_of,
)

BY_POSITION = "by_position"


class MinHashBands(beam.DoFn):
    """Document -> (band key, (position, signature bytes)) per LSH band (main), and
    (position, document tuple) (BY_POSITION); blank documents go to BLANK untouched."""

    def __init__(self, config: minhash.MinHashConfig):
        self.config = config

    def process(self, doc: Document):
        if not doc.text.strip():
            yield beam.pvalue.TaggedOutput(BLANK, doc)
            return
        position = doc_position(doc)
        sig = minhash.signature(minhash.units_of(doc.text), self.config)
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
                count - self.config.near_max_bucket
            )
        if len(members) > 1:
            for position, earlier, jaccard in minhash.earlier_matches(
                members, self.config.near_threshold
            ):
                yield position, (earlier, jaccard)

    def finish_bundle(self):
        yield from emit_stats(self.stats)


def near_removed(position: tuple, earlier: tuple, jaccard: float, text: str) -> Removed:
    place = ref(earlier)
    return Removed(
        "duplicate_near",
        position,
        f"estimated Jaccard {jaccard:.2f} with the earlier {place['source']}:{place['line']}"
        + ("" if place["offset"] is None else f" (byte {place['offset']})"),
        text[:EXCERPT_CHARS],
        kept=earlier,
    )


class DropMatched(beam.DoFn):
    """(position, {"doc": [document], "match": [(earlier, jaccard)]}) -> the document if it
    matched nothing earlier (main), else a `Removed` (REMOVED) and a count (STATS)."""

    def start_bundle(self):
        self.stats = Counter()

    def process(self, element):
        position, grouped = element
        doc = Document(*next(iter(grouped["doc"])))
        matches = list(grouped["match"])
        if not matches:
            yield doc
            return
        earlier, jaccard = min(matches)
        self.stats[removal_key(split_of(doc), "documents_duplicate", "near")] += 1
        yield beam.pvalue.TaggedOutput(REMOVED, near_removed(position, earlier, jaccard, doc.text))

    def finish_bundle(self):
        yield from emit_stats(self.stats)


class NearDedup(beam.PTransform):
    """Documents -> `(docs, removed, stats)`: the documents that match no earlier one (see
    the module docstring), `Removed` records of those that do, and the counts.

    Args:
        config: shingles, bands, rows, threshold and the bucket cap (the `--near_*` flags).
    """

    def __init__(self, config: minhash.MinHashConfig):
        super().__init__()
        self.config = config

    def expand(self, docs):
        banded = docs | "MinHashBands" >> beam.ParDo(MinHashBands(self.config)).with_outputs(
            BLANK, BY_POSITION, main="bands"
        )
        cap = self.config.near_max_bucket
        matched = (
            banded.bands
            | "FirstMembers" >> beam.CombinePerKey(FirstMembers(cap))
            | "MatchInBuckets"
            >> beam.ParDo(MatchInBuckets(self.config)).with_outputs(STATS, main="matches")
        )
        earliest = matched.matches | "EarliestMatch" >> beam.CombinePerKey(min)
        kept = (
            {"doc": banded[BY_POSITION], "match": earliest}
            | "JoinMatches" >> beam.CoGroupByKey()
            | "DropMatched" >> beam.ParDo(DropMatched()).with_outputs(REMOVED, STATS, main="docs")
        )
        docs = (banded[BLANK], kept.docs) | "WithBlankNear" >> beam.Flatten()
        stats = (matched[STATS], kept[STATS]) | "NearStats" >> beam.Flatten()
        return docs, kept[REMOVED], stats
