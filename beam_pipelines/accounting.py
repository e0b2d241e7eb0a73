"""Exact accounting of a prepare run: every document and token is counted somewhere.

Documents read = tokenized + empty + rejected (dead-lettered) + duplicate + filtered (quality
rules) + contaminated (decontamination) + low quality (a quality model); per split, tokens in =
tokens written + tokens dropped. The commit step checks both before anything is committed: a
mismatch is a bug (bad input is dead-lettered, never lost), so it stops the run.

A document belongs to a split as soon as it is read: the split its input names, else the one
the hash of its text picks, chosen once by `cleaning.CountBySplit` as the document enters the
removal steps and carried with it (`Document.split`); a removed document is counted in that
split. So per split, documents read (counted by that same step) = tokenized + empty +
duplicate + filtered + contaminated, and the run's documents read = the splits' + rejected: rejected
records have no split (a bad record may have no text to hash). Removals are counted by
kind: `{split}/documents_filtered/{rule}`, `{split}/documents_duplicate/{exact|near}` and, with
`--decontaminate ... --decontam_action remove` (beam_pipelines/decontamination.py),
`{split}/documents_contaminated/{evaluation set}` and, with `--quality_model ...
--quality_action remove` (beam_pipelines/model_filter.py), `{split}/documents_low_quality/model`:
each a term of the sums above, 0 when off.

With named sources (`--sources`, beam_pipelines/mixture.py) the mixture may leave a clean
document out (`{split}/documents_cut`) or pass it on more than once (each extra copy in
`{split}/documents_repeated`), so per split and for the run: documents read + repeated =
tokenized + empty + (rejected) + duplicate + filtered + cut. What each source gave is counted
under `source.{name}.{what}` (no split: its names hold no "/"), and its sums are checked
against the splits'.

The counts themselves: DoFns count into a Counter and emit it once per bundle (`emit_stats`),
or emit one count from `process` (`emit_stat`); either way each count becomes a Beam metric
(the Dataflow UI, progress) and a (name, count) pair on the STATS output that the accounting
sums. These two are the only way counts reach STATS, so the metrics and the accounting never
part (tests/beam_pipelines/test_layout.py checks).
"""

from __future__ import annotations

from collections import Counter

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

STATS = "stats"  # the tagged output of (counter name, count) pairs that the accounting sums

SPLIT_KEYS = (
    "documents_tokenized",
    "documents_empty",
    "tokens_in",
    "tokens_dropped",
    "tokens_padded",
    "documents_cut",
    "documents_repeated",
)
# What the mixture left out and added: the outcomes beside tokenized, empty and removed.
MIXTURE_KEYS = ("documents_cut", "documents_repeated")
# Removals, counted per kind under `removal_key(split, name, kind)`.
REMOVED_KEYS = {
    "documents_filtered": "filtered_by_rule",
    "documents_duplicate": "duplicates_by_kind",
    "documents_contaminated": "contaminated_by_set",
    "documents_low_quality": "low_quality_by_model",
}
# Run-wide counters that are not documents (e.g. what near dedup skipped), under RUN_PREFIX.
RUN_PREFIX = "run."
# What one named source gave (`source_key`), under SOURCE_PREFIX.
SOURCE_PREFIX = "source."
SOURCE_KEYS = (
    "documents",
    "characters",
    "documents_out",
    "characters_out",
    "repeated",
    "cut",
    "tokens",
)


def split_key(split: str, name: str) -> str:
    """The counter of `name` (one of SPLIT_KEYS, or "documents_read") in `split`, e.g.
    'train/tokens_in'."""
    return f"{split}/{name}"


def removal_key(split: str, name: str, kind: str) -> str:
    """The counter of one kind of removal, e.g. 'train/documents_filtered/min_words'."""
    return f"{split_key(split, name)}/{kind}"


def source_key(name: str, what: str) -> str:
    """The counter of `what` (one of SOURCE_KEYS) for the named source, e.g.
    'source.wiki.cut'."""
    return f"{SOURCE_PREFIX}{name}.{what}"


def source_counts(stats: dict) -> dict:
    """{source name: {what: count}} of a run with named sources; {} without."""
    out: dict = {}
    for key, n in sorted(stats.items()):
        if key.startswith(SOURCE_PREFIX):
            name, what = key[len(SOURCE_PREFIX) :].rsplit(".", 1)
            out.setdefault(name, dict.fromkeys(SOURCE_KEYS, 0))[what] = int(n)
    return out


def _counted(key: str, value: int) -> tuple[str, int]:
    beam.metrics.Metrics.counter("prepare", key).inc(value)
    return key, value


def emit_stat(key: str, value: int) -> beam.pvalue.TaggedOutput:
    """One count, from `process`: a Beam metric and a (key, value) pair on STATS."""
    return beam.pvalue.TaggedOutput(STATS, _counted(key, value))


def emit_stats(stats: Counter):
    """A bundle's counts, from `finish_bundle` (whose outputs must carry their window), as
    Beam metrics and (name, count) pairs on STATS."""
    for key, value in stats.items():
        yield beam.pvalue.TaggedOutput(STATS, GlobalWindows.windowed_value(_counted(key, value)))


def _by_kind(stats: dict, prefix: str) -> dict:
    return {
        key[len(prefix) :]: int(n) for key, n in sorted(stats.items()) if key.startswith(prefix)
    }


def _removals(stats: dict, split: str) -> dict:
    out = {}
    for name, breakdown in REMOVED_KEYS.items():
        kinds = _by_kind(stats, split_key(split, name) + "/")
        out[name], out[breakdown] = sum(kinds.values()), kinds
    return out


def _add(total: dict, part: dict) -> None:
    for key, value in part.items():
        if isinstance(value, dict):
            _add(total.setdefault(key, {}), value)
        else:
            total[key] = total.get(key, 0) + value


def accounting_for(stats: dict, split: str, splits: list) -> dict:
    """The manifest's `accounting`: this split's counts and the run's input totals."""
    own = {key: int(stats.get(split_key(split, key), 0)) for key in SPLIT_KEYS}
    own["tokens_written"] = own["tokens_in"] - own["tokens_dropped"]
    own["dropped_fraction"] = own["tokens_dropped"] / own["tokens_in"] if own["tokens_in"] else 0
    own |= _removals(stats, split)
    own["documents_read"] = int(stats.get(split_key(split, "documents_read"), 0))
    run = {key: int(stats.get(key, 0)) for key in ("documents_read", "documents_rejected")}
    for s in splits:
        _add(
            run,
            {
                key: int(stats.get(split_key(s, key), 0))
                for key in ("documents_tokenized", "documents_empty", *MIXTURE_KEYS)
            }
            | _removals(stats, s),
        )
    for key in ("documents_tokenized", "documents_empty", *MIXTURE_KEYS, *REMOVED_KEYS):
        run.setdefault(key, 0)
    for breakdown in REMOVED_KEYS.values():
        run.setdefault(breakdown, {})
    run |= {
        key[len(RUN_PREFIX) :]: int(n)
        for key, n in sorted(stats.items())
        if key.startswith(RUN_PREFIX)
    }
    if sources := source_counts(stats):
        run["sources"] = sources
    return {"split": own, "run": run}


class AccountingError(RuntimeError):
    """The counts do not add up: a bug, never bad input (bad input is dead-lettered)."""


# The outcomes of a document: what documents read (+ repeated copies) add up to.
OUTCOMES = ("documents_tokenized", "documents_empty", "documents_cut", *REMOVED_KEYS)


def check_accounting(stats: dict, written: list, splits: list) -> None:
    run = accounting_for(stats, splits[0], splits)["run"] if splits else {}
    outcomes = sum(run.get(k, 0) for k in ("documents_rejected", *OUTCOMES))
    if outcomes != run.get("documents_read", 0) + run.get("documents_repeated", 0):
        raise AccountingError(f"documents do not add up: {run}")
    unknown = {k.split("/")[0] for k in stats if "/" in k} - set(splits)
    if unknown:
        raise AccountingError(f"documents were assigned to unexpected splits {sorted(unknown)}")
    tokens_in = 0
    for split in splits:
        own = accounting_for(stats, split, splits)["split"]
        if sum(own[k] for k in OUTCOMES) != own["documents_read"] + own["documents_repeated"]:
            raise AccountingError(f"{split}: documents do not add up: {own}")
        on_disk = sum(w["num_tokens"] for w in written if w["split"] == split)
        if own["tokens_in"] - own["tokens_dropped"] != on_disk:
            raise AccountingError(
                f"{split}: {own['tokens_in']} tokens in, "
                f"{own['tokens_dropped']} dropped, but {on_disk} written"
            )
        tokens_in += own["tokens_in"]
    if run.get("sources"):
        _check_sources(run, tokens_in)


def _check_sources(run: dict, tokens_in: int) -> None:
    """Each source's documents in and out agree, and the sources' sums are the splits'."""
    sources = run["sources"]
    for name, n in sources.items():
        if n["documents"] + n["repeated"] - n["cut"] != n["documents_out"]:
            raise AccountingError(f"source {name}: documents do not add up: {n}")
    sums = {what: sum(n[what] for n in sources.values()) for what in ("cut", "repeated", "tokens")}
    expected = {
        "cut": run["documents_cut"],
        "repeated": run["documents_repeated"],
        "tokens": tokens_in,
    }
    if sums != expected:
        raise AccountingError(f"the sources' counts {sums} are not the splits' {expected}")
