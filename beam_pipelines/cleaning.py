"""What prepare removes before tokenizing, as Beam transforms: documents that fail the quality
rules (beam_pipelines/quality.py) and duplicates (beam_pipelines/dedup.py); every removal
counted, and a bounded sample of them written next to the dead letters.

    docs -> CountBySplit (the split chosen) -> FilterQuality (per document, no shuffle)
         -> ExactDedup (keyed, all inputs) [-> NearDedup] -> docs to tokenize

Each document's split is chosen once, as it enters these steps (`CountBySplit`: the split
its input names, else by a hash of its text), and travels with it to the tokenizing step.
The quality filter runs first: it needs no shuffle, and what it drops costs the dedup nothing.
A document is removed (and counted in its split) once, by the first step that removes it.
Dedup decides over all inputs and splits at once, so the one kept copy of a text lands in
one split only. Blank documents pass every step untouched: the tokenizing step counts them
as empty in their split.

The sample: at most `--removed_sample_size` records per rule (the first ones in input order,
so reruns agree), one JSON line each, in `OUT/dead_letter/{run_id}-removed_sample-*.jsonl`:
source, line, offset, rule, reason, an excerpt, and for a duplicate `kept`: the copy kept
(for a near duplicate, the earlier document it matched).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import apache_beam as beam

from beam_pipelines import jsonl_files, quality
from beam_pipelines.accounting import STATS, emit_stats, removal_key, split_key
from beam_pipelines.documents import (
    EXCERPT_CHARS,
    REMOVED,
    Document,
    Removed,
    doc_position,
    split_of,
)
from common import splits


class CountBySplit(beam.DoFn):
    """The one step that chooses a document's split, right after the read: the one its input
    names, else `common.splits.hash_split` of the whole text (the only place prepare hashes
    it). The split travels with the document (`doc.split`): every later step reads it, and
    a local run's rereads get it from the first read's dedup records. Also counts each
    document in its split: the per-split "documents read" the accounting checks."""

    def __init__(self, validation_fraction=0.0, test_fraction=0.0):
        self.fractions = (validation_fraction, test_fraction)

    def start_bundle(self):
        self.stats = Counter()

    def process(self, doc: Document):
        if doc.split is None:
            doc = dataclasses.replace(doc, split=splits.hash_split(doc.text, *self.fractions))
        self.stats[split_key(doc.split, "documents_read")] += 1
        yield doc

    def finish_bundle(self):
        yield from emit_stats(self.stats)


class FilterQuality(beam.DoFn):
    """Document -> the document if it passes every rule (main), else a `Removed` (REMOVED)
    and a count per split and rule (STATS)."""

    def __init__(self, config: quality.QualityConfig):
        self.config = config

    def start_bundle(self):
        self.stats = Counter()

    def process(self, doc: Document):
        failure = quality.first_failure(doc.text, self.config)
        if failure is None:
            yield doc
            return
        self.stats[removal_key(split_of(doc), "documents_filtered", failure.rule)] += 1
        yield beam.pvalue.TaggedOutput(
            REMOVED,
            Removed(failure.rule, doc_position(doc), failure.reason(), doc.text[:EXCERPT_CHARS]),
        )

    def finish_bundle(self):
        yield from emit_stats(self.stats)


class Clean(beam.PTransform):
    """Documents -> `(docs, removed, stats)`: the documents to tokenize, `Removed` records
    (a tuple of PCollections, one per step: see `WriteRemovedSample`), and (name, count)
    pairs for the accounting."""

    def __init__(
        self,
        quality_config: quality.QualityConfig | None,
        validation_fraction: float = 0.0,
        test_fraction: float = 0.0,
        exact_dedup: beam.PTransform | None = None,
        near_dedup: beam.PTransform | None = None,
    ):
        super().__init__()
        # The dedups come from the run's execution (beam_pipelines/execution.py): Beam's
        # groupings, or sorted files on disk on a local runner. None: that step is off.
        self.exact_dedup, self.near_dedup = exact_dedup, near_dedup
        self.quality_config = quality_config
        self.fractions = (validation_fraction, test_fraction)

    def expand(self, docs):
        counted = docs | "CountBySplit" >> beam.ParDo(CountBySplit(*self.fractions)).with_outputs(
            STATS, main="docs"
        )
        docs, removed, stats = counted.docs, [], [counted[STATS]]
        if self.quality_config is not None:
            filtered = docs | "FilterQuality" >> beam.ParDo(
                FilterQuality(self.quality_config)
            ).with_outputs(REMOVED, STATS, main="kept")
            docs = filtered.kept
            removed.append(filtered[REMOVED])
            stats.append(filtered[STATS])
        # Near dedup comes after the exact one (exact copies are the cheap part).
        for label, step in (("ExactDedup", self.exact_dedup), ("NearDedup", self.near_dedup)):
            if step is not None:
                docs, copies, counts = docs | label >> step
                removed.append(copies)
                stats.append(counts)
        if not removed:
            removed.append(docs.pipeline | "NothingRemoved" >> beam.Create([]))
        return docs, tuple(removed), stats | "RemovalStats" >> beam.Flatten()


def sample_lines(groups: list, per_rule: int) -> list[str]:
    """[(rule, [(pos, json line), ...]), ...] -> the first `per_rule` lines of each rule in
    input order, by rule (a rule may come in several groups)."""
    by_rule: dict[str, list] = {}
    for rule, items in groups:
        by_rule.setdefault(rule, []).extend(items)
    return [line for rule in sorted(by_rule) for _, line in sorted(by_rule[rule])[:per_rule]]


class WriteRemovedSample(beam.PTransform):
    """`Removed` records (a tuple of PCollections, `Clean`'s) -> one JSONL file of at most
    `per_rule` records a rule; yields its path. The first records by input position are
    kept: a sample reruns reproduce. Each input is cut to its first records before they
    meet (a local runner would hold a Flatten of every removed record in memory)."""

    def __init__(self, path_prefix: str, per_rule: int):
        super().__init__()
        self.path_prefix, self.per_rule = path_prefix, per_rule

    def expand(self, parts):
        if self.per_rule > 0:
            firsts = [
                part
                | f"ByRule{i}" >> beam.Map(lambda r: (r.rule, (r.pos, r.to_json())))
                | f"FirstPerRule{i}" >> beam.combiners.Top.SmallestPerKey(self.per_rule)
                for i, part in enumerate(parts)
            ]
            groups = firsts | "AllFirsts" >> beam.Flatten() | "AllRules" >> beam.combiners.ToList()
        else:
            groups = parts[0].pipeline | "NoSample" >> beam.Create([[]])
        # One file, empty too (as before): `groups` is one list, present in every run.
        return groups | "WriteSample" >> beam.Map(
            lambda g: jsonl_files.write_lines(self.path_prefix, sample_lines(g, self.per_rule))
        )
