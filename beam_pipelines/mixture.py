"""Named, weighted sources: how much of each input a prepare run keeps, cuts or repeats.

    python -m beam_pipelines.prepare --sources 'wiki=wiki/*.jsonl;web=web/*.jsonl,cc/*.jsonl' \\
        --weights 'wiki=1,web=3' --max_repeats 'wiki=4' --tokenizer TOK --output_dir OUT

`--sources` names each input (`NAME=GLOB[,GLOB...]`, entries joined by `;`). What a source
holds, its **size**, is the characters of its clean documents: those left after the quality
filter and dedup (blank ones aside), so a share is a share of clean text. A source's weight
comes from `--weights NAME=W,...` (every source named, W >= 0, not all 0), or from
`--temperature T` (weight ∝ size^(1/T), as multilingual recipes sample languages: T = 1
keeps the natural sizes, larger T flattens them toward equal shares), or, with neither, is its
size (every document kept once). The weights, normalised, are the shares asked for.

**The total.** Each source may be used up to `--max_repeats` times (`R` for all, or
`NAME=R,...`; default 1: never repeated; below 1 caps a source at that fraction). The output
is the largest total that gives every source its share without using any source more than
its limit: total = min over sources of size × limit / share. The source that sets it is used
exactly its limit; every other is cut (rate < 1) or repeated (rate > 1) to its share. A
source with a weight but no clean text is left out of that minimum (its share goes to the
others; its record shows weight > 0 and share 0).

**Which documents.** Each source gets a rate r = share × total / size. A clean document is
passed on floor(r) times, plus once more when its draw `hashing.unit_draw(place, --seed)`
is below r - floor(r): a hash of where it lies in the input, not a random draw, so the same
input and seed give the same documents on every rerun and runner. A document passed on 0
times is counted as cut, each copy past the first as repeated, in its split and its source
(beam_pipelines/accounting.py). Copies are whole documents in the document's own split,
made after dedup (which would otherwise remove them); the shuffle scatters their rows. The
realised shares differ from the asked ones by the draws' spread (about 1/sqrt(documents
kept) of a share); the manifest records both.

The sampling waits for every source's size (a side input): on Beam's local runners the
clean documents are held in memory meanwhile (they do not spill), which runs without
`--sources` never do.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter

import apache_beam as beam

from beam_pipelines import hashing, input_spec
from beam_pipelines.accounting import STATS, emit_stats, source_key, split_key
from beam_pipelines.documents import Document, doc_position, split_of
from common import fs
from common.errors import UserError

NAME = re.compile(r"[A-Za-z0-9_-]+")  # no "/" or ".": source names are parts of counter names


class MixtureError(UserError):
    """A --sources, --weights, --temperature or --max_repeats value that cannot work."""


@dataclasses.dataclass(frozen=True)
class MixtureSpec:
    """The named sources and how to weigh them, checked (`parse`); `files` once listed."""

    sources: tuple[tuple[str, str], ...]  # (name, comma-separated globs), in the given order
    weights: tuple[tuple[str, float], ...] = ()  # as given; (): from the sizes
    temperature: float | None = None
    max_repeats: tuple[tuple[str, float], ...] = ()  # every source's limit
    files: tuple[tuple[str, str, tuple], ...] = ()  # (path, source name, listed fs.Stamp)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.sources]

    @property
    def origins(self) -> dict[str, str]:
        """{path read: the source it belongs to}."""
        return {path: name for path, name, _ in self.files}


def named_entries(text: str, sep: str, flag: str) -> list[tuple[str, str]]:
    """'a=x<sep>b=y' -> [('a', 'x'), ('b', 'y')], each NAME=VALUE, no name twice."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(sep))):
        name, eq, value = (x.strip() for x in part.partition("="))
        if not eq or not name or not value:
            raise MixtureError(f"{flag} entry {part!r} is not NAME=VALUE")
        if any(name == seen for seen, _ in out):
            raise MixtureError(f"{flag} names {name!r} twice")
        out.append((name, value))
    return out


def _numbers(text: str, flag: str, names: list[str]) -> dict[str, float]:
    """'a=1,b=2.5' -> {'a': 1.0, 'b': 2.5}, every name one of `names`, every value finite."""
    out = {}
    for name, value in named_entries(text, ",", flag):
        if name not in names:
            raise MixtureError(f"{flag} names {name!r}, which is not a source ({', '.join(names)})")
        try:
            out[name] = float(value)
        except ValueError:
            raise MixtureError(f"{flag} {name}={value!r} is not a number") from None
        if not math.isfinite(out[name]):
            raise MixtureError(f"{flag} {name}={value} is not a finite number")
    return out


def _weights(text: str, names: list[str]) -> tuple:
    weights = _numbers(text, "--weights", names)
    negative = [f"{n}={w:g}" for n, w in weights.items() if w < 0]
    if negative:
        raise MixtureError(f"--weights must not be negative ({', '.join(negative)})")
    missing = [n for n in names if n not in weights]
    if missing:
        raise MixtureError(
            f"--weights gives no weight to {', '.join(missing)}; give every source one "
            "(0 leaves a source out)"
        )
    if not sum(weights.values()):
        raise MixtureError("--weights are all 0; give at least one source a positive weight")
    return tuple((n, weights[n]) for n in names)


def _max_repeats(text: str, names: list[str]) -> tuple:
    """'3' (every source) or 'a=3,b=0.5' (the others 1) -> every source's limit."""
    try:
        limits = dict.fromkeys(names, float(text)) if text.strip() else {}
    except ValueError:
        limits = _numbers(text, "--max_repeats", names)
    bad = [f"{n}={r:g}" for n, r in limits.items() if not (r > 0 and math.isfinite(r))]
    if bad:
        raise MixtureError(f"--max_repeats must be above 0 ({', '.join(bad)})")
    return tuple((n, limits.get(n, 1.0)) for n in names)


def parse(sources: str, weights: str = "", temperature=None, max_repeats: str = "") -> MixtureSpec:
    """The checked spec of `--sources` and the flags that weigh them (one line each when they
    cannot work); the files are listed later (`with_files`)."""
    entries = named_entries(sources, ";", "--sources")
    for name, _ in entries:
        if not NAME.fullmatch(name):
            raise MixtureError(f"--sources name {name!r} may hold only letters, digits, _ and -")
    if not entries:
        raise MixtureError("--sources names no source; give NAME=GLOB[,GLOB...];NAME=...")
    names = [name for name, _ in entries]
    if weights and temperature is not None:
        raise MixtureError("give --weights or --temperature, not both")
    return MixtureSpec(
        tuple(entries),
        _weights(weights, names) if weights else (),
        temperature,
        _max_repeats(max_repeats, names),
    )


def with_files(spec: MixtureSpec) -> MixtureSpec:
    """The spec with every source's files listed (`input_spec.expand_inputs`: a glob that
    matches nothing is refused); a file in two sources is refused (whose share is it?)."""
    files, owner = [], {}
    for name, globs in spec.sources:
        for path, stamp in input_spec.expand_inputs(globs, f"--sources {name}").items():
            same = fs.identity(path)
            if same in owner and owner[same] != name:
                raise MixtureError(
                    f"{path} matches the --sources globs of both {owner[same]!r} and {name!r}; "
                    "make the globs disjoint"
                )
            owner[same] = name
            files.append((path, name, tuple(stamp)))
    return dataclasses.replace(spec, files=tuple(files))


def listed(settings):
    """`settings` (`options.Settings`) with its --sources' files listed, on the launcher;
    as it is without --sources."""
    if settings.mixture is None:
        return settings
    return dataclasses.replace(settings, mixture=with_files(settings.mixture))


def asked_weights(spec: MixtureSpec, sizes: dict) -> dict[str, float]:
    """{name: weight} before normalising: --weights, else size^(1/T), else the size."""
    if spec.weights:
        return dict(spec.weights)
    power = 1.0 / spec.temperature if spec.temperature else 1.0
    return {n: float(sizes.get(n, 0)) ** power if sizes.get(n) else 0.0 for n in spec.names}


def plan(spec: MixtureSpec, sizes: dict) -> dict:
    """{name: {"weight", "max_repeats", "rate"}} for the sources' sizes (characters of clean
    text): the shares asked, each source's limit, and how many times each of its documents
    is passed on, on average (see the module docstring for the total)."""
    asked, limits = asked_weights(spec, sizes), dict(spec.max_repeats)
    total_weight = sum(asked.values())
    present = {n: w / total_weight for n, w in asked.items() if w > 0 and sizes.get(n, 0) > 0}
    covered = sum(present.values())
    total = min((sizes[n] * limits[n] / (w / covered) for n, w in present.items()), default=0)
    out = {}
    for name in spec.names:
        rate = present[name] / covered * total / sizes[name] if name in present else 0.0
        rate = min(rate, limits[name])
        if abs(rate - round(rate)) < 1e-9:  # the limiting source: exactly its limit
            rate = float(round(rate))
        weight = asked[name] / total_weight if total_weight else 0.0
        out[name] = {"weight": weight, "max_repeats": limits[name], "rate": rate}
    return out


class Sample(beam.DoFn):
    """Document (its `origin` set) -> the document 0, 1 or more times, by its source's rate
    (the side input `rates`: {name: rate}); counts per source and split (STATS). Blank
    documents pass once, uncounted here: the tokenizing step counts them as empty."""

    def __init__(self, seed: int):
        self.seed = seed

    def start_bundle(self):
        self.stats = Counter()

    def process(self, doc: Document, rates: dict):
        if not doc.text.strip():
            yield doc
            return
        rate, size = rates[doc.origin], len(doc.text)
        whole = math.floor(rate)
        copies = whole + (
            rate > whole and hashing.unit_draw(doc_position(doc), self.seed) < rate - whole
        )
        counts = {"documents": 1, "characters": size, "documents_out": copies}
        counts |= {"characters_out": copies * size, "cut": copies == 0}
        counts["repeated"] = max(copies - 1, 0)
        for what, n in counts.items():
            self.stats[source_key(doc.origin, what)] += n
        self.stats[split_key(split_of(doc), "documents_cut")] += counts["cut"]
        self.stats[split_key(split_of(doc), "documents_repeated")] += counts["repeated"]
        for _ in range(copies):
            yield doc

    def finish_bundle(self):
        yield from emit_stats(+self.stats)


def _size(doc: Document) -> list[tuple[str, int]]:
    """(source, characters) of a document that counts toward its source's size."""
    return [(doc.origin, len(doc.text))] if doc.text.strip() else []


class Mix(beam.PTransform):
    """Clean documents -> `(docs, stats, plan)`: each document as many times as its source's
    rate gives, (name, count) pairs for the accounting, and the one-element PCollection of
    the run's `plan` (the commit records it in the manifests).

    Args:
        spec: the sources, listed (`with_files`).
        seed: the per-document draws' seed (--seed).
    """

    def __init__(self, spec: MixtureSpec, seed: int):
        super().__init__()
        self.spec, self.seed = spec, seed

    def expand(self, docs):
        origins = self.spec.origins
        named = docs | "NameSources" >> beam.Map(
            lambda doc: dataclasses.replace(doc, origin=origins[doc.source])
        )
        sizes = (
            named
            | "SourceSizes" >> beam.FlatMap(_size)
            | "SumSizes" >> beam.CombinePerKey(sum)
            | "AllSizes" >> beam.combiners.ToList()
        )
        spec = self.spec
        plans = sizes | "Plan" >> beam.Map(lambda pairs: plan(spec, dict(pairs)))
        rates = plans | "Rates" >> beam.Map(lambda p: {n: s["rate"] for n, s in p.items()})
        sampled = named | "Sample" >> beam.ParDo(
            Sample(self.seed), rates=beam.pvalue.AsSingleton(rates)
        ).with_outputs(STATS, main="docs")
        return sampled.docs, sampled[STATS], plans


def manifest_record(spec_plan: dict, counts: dict) -> dict:
    """The manifest's `mixture`: per source its plan (weight, max_repeats, rate), its counts
    (`accounting.source_counts`) and its realised shares of the characters and tokens out."""
    chars = sum(n["characters_out"] for n in counts.values()) or 1
    tokens = sum(n["tokens"] for n in counts.values()) or 1
    zero = dict.fromkeys(("documents", "characters_out", "tokens"), 0)
    sources = {}
    for name, planned in spec_plan.items():
        n = counts.get(name, zero)
        sources[name] = {
            **planned,
            **counts.get(name, {}),
            "share": n["characters_out"] / chars,
            "token_share": n["tokens"] / tokens,
        }
    return {"sources": sources}


def summary_lines(record: dict) -> list[str]:
    """One line per source for prepare's summary."""
    return [
        f"source {name}: {n.get('documents', 0):,} clean documents, "
        f"{n.get('documents_out', 0):,} passed on ({n.get('cut', 0):,} cut, "
        f"{n.get('repeated', 0):,} repeats), {n.get('tokens', 0):,} tokens; weight "
        f"{n['weight']:.3f}, share {n['share']:.3f} of characters, {n['token_share']:.3f} "
        "of tokens"
        for name, n in record.get("sources", {}).items()
    ]
