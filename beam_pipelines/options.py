"""All flags of the prepare pipeline, as Beam `PipelineOptions` (one typed place).

Every standard Beam flag (`--runner`, `--direct_num_workers`, `--max_num_workers`,
`--sdk_container_image`, `--setup_file`, ...) passes through untouched.
"""

from __future__ import annotations

import dataclasses

from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipelines import (
    decontamination,
    dedup,
    input_spec,
    minhash,
    mixture,
    quality,
    quality_models,
)
from beam_pipelines.input_spec import InputSpec
from beam_pipelines.sources import DEFAULT_RANGE_BYTES
from common import flags, fs, prepared_dir
from common.errors import UserError
from common.flags import flag

DEFAULT_TARGET_SHARD_BYTES = 150_000_000
# A record of L int64 ids is ~L * (2-3 varint bytes + 1 mask byte) + ~20 bytes; 4 bytes a
# token is a slight overestimate for vocabularies under 2**21, so shards land at ~100-150 MB.
BYTES_PER_TOKEN_ESTIMATE = 4
PROG = "python -m beam_pipelines.prepare"


@dataclasses.dataclass(frozen=True)
class PrepareFlags:
    """Every flag of prepare, in `--help` order: its own, and those of the input, near-dedup
    and quality dataclasses (`group` fields). Beam's options, `--help`, the bounds `resolve`
    enforces and the manifest's recorded arguments all come from these fields."""

    source: InputSpec = flags.group(InputSpec)  # --input, --text_field, --hf_dataset, ...
    splits: str = flag("inputs that already form splits: 'train=GLOB;validation=GLOB;test=GLOB'")
    sources: str = flag(
        "named inputs mixed by --weights or --temperature: 'NAME=GLOB[,GLOB...];NAME=...' "
        "(beam_pipelines/mixture.py); split like --input"
    )
    weights: str = flag(
        "each --sources name's weight, 'NAME=W,...' (>= 0, not all 0): the share of clean "
        "characters it gets; default: its size"
    )
    temperature: float | None = flag(
        "weigh --sources by size^(1/T) instead of --weights (1: natural sizes; larger: flatter)",
        greater_than=0,
    )
    max_repeats: str = flag(
        "most times a --sources source's text is used, 'R' or 'NAME=R,...' (others 1); the "
        "output is the most that fits every limit",
        "1",
    )
    # Their bounds are one rule across both (`check`): the sum in [0, 1).
    validation_fraction: float = flag(
        "share of --input documents hashed into 'validation' (deterministic)", 0.0
    )
    test_fraction: float = flag(
        "share of --input documents hashed into 'test' (deterministic)", 0.0
    )
    tokenizer: str = flag("folder (local or gs://) with tokenizer.json from train_tokenizer")
    output_dir: str = flag("where split folders go (local or gs://)")
    max_length: int = flag("tokens per sequence", 128, minimum=8)
    shard_size: int = flag("records per shard; 0 = sized for ~150 MB shards", 0, minimum=0)
    num_shards: int | None = flag(
        "number of shards per split (overrides --shard_size); fewer "
        "when some shards' key ranges hold no row: no empty shard is "
        "written",
        minimum=1,
    )
    pad_tail: bool = flag(
        "pad the last partial sequence of each split instead of dropping it", False
    )
    read_range_bytes: int = flag(
        "uncompressed .jsonl / line .txt files larger than this are read in parallel byte ranges",
        DEFAULT_RANGE_BYTES,
        minimum=1,
    )
    tokenize_batch_chars: int = flag(
        "characters handed to the fast tokenizer per encode_batch call", 1_000_000, minimum=1
    )
    seed: int = flag("seed of the deterministic shuffle and of --sources' draws", 0, minimum=0)
    max_rejected_fraction: float = flag(
        "refuse to commit when more than this share of the documents is rejected (1.0 turns "
        "the check off)",
        0.1,
        minimum=0,
        maximum=1,
    )
    max_filtered_fraction: float = flag(
        "refuse to commit when the quality filter removes more than this share of the "
        "documents: rules that do not fit a corpus's language (1.0 turns the check off)",
        0.1,
        minimum=0,
        maximum=1,
    )
    takeover_lock: bool = flag(
        "take the output folder over from a run that holds its lock (only when that run is dead)",
        False,
    )
    lock_timeout_hours: float = flag(
        "a lock whose heartbeat (refreshed every minute while its run lives) is older than "
        "this is taken over without --takeover_lock; a lock whose Dataflow job still runs is "
        "kept, whatever its age",
        1.0,
        minimum=0.05,
    )
    progress_seconds: float = flag(
        "seconds between progress lines on the local runner (0 = "
        "none; on Dataflow the job's console shows progress)",
        10.0,
        minimum=0,
    )
    dedup: str = flag(
        "exact: keep one copy of documents with the same normalised text (zero-width "
        "characters and soft hyphens removed, NFKC, casefolded, whitespace collapsed), the "
        "first in input order, across all inputs and splits; near: also drop documents whose "
        "MinHash estimate of word 5-gram Jaccard with an earlier one is >= --near_threshold "
        "(beam_pipelines/dedup.py, minhash.py)",
        "exact",
        choices=dedup.MODES,
    )
    near: minhash.MinHashConfig = flags.group(minhash.MinHashConfig)
    quality_filter: str = flag(
        "drop degenerate documents by the rules of "
        "beam_pipelines/quality.py (thresholds: the --min_words ... "
        "--max_top_4gram_fraction flags)",
        "basic",
        choices=quality.FILTERS,
    )
    rules: quality.QualityConfig = flags.group(quality.QualityConfig)
    decontam: decontamination.DecontamConfig = flags.group(decontamination.DecontamConfig)
    quality_model: quality_models.QualityModelConfig = flags.group(
        quality_models.QualityModelConfig
    )
    removed_sample_size: int = flag(
        "removed documents written per rule (and duplicate kind) to "
        f"OUT/{prepared_dir.DEAD_LETTER_DIR}/*-{prepared_dir.SAMPLE_KIND} (the first ones in "
        "input order; 0 = none)",
        20,
        minimum=0,
    )


class PrepareOptions(PipelineOptions):
    """`PrepareFlags` as Beam options: `opts.max_length` etc., next to Beam's own."""

    @classmethod
    def flag_names(cls) -> list[str]:
        """The names of this pipeline's own flags (not Beam's)."""
        return sorted(field.name for field in flags.flag_fields(PrepareFlags))

    @classmethod
    def _add_argparse_args(cls, parser):
        flags.add_flags(parser, PrepareFlags)


class FlagError(UserError):
    """A flag value or combination that cannot work; nothing has been touched yet."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """A run's flags, checked and resolved once (`resolve`): what the graph and the
    executions of its keyed steps are built from; nothing below the launcher derives the
    split names, configs or shard size again."""

    # Every flag's value, as given or defaulted. Its `source` (an `InputSpec`) is not frozen:
    # train_tokenizer's config extends that class and sets a field after init.
    flags: PrepareFlags
    # (split, globs) of the files read; split None: --input, split by the fractions; empty
    # with --hf_dataset (its splits are the dataset's) and --sources (`mixture`'s files)
    inputs: tuple[tuple[str | None, str], ...]
    splits: tuple[str, ...]  # the splits this run writes, in a stable order
    quality: quality.QualityConfig | None  # None: --quality_filter none
    near: minhash.MinHashConfig | None  # None: no near dedup
    shard_size: int  # records per shard (--shard_size, or sized for ~150 MB shards)
    mixture: mixture.MixtureSpec | None = None  # None: no --sources
    # None: no --decontaminate; its sets read and indexed on the launcher (`decontamination.load`)
    decontamination: decontamination.DecontamSpec | None = None
    # None: no --quality_model; read and fingerprinted on the launcher (`quality_models.load`)
    quality_model: quality_models.QualityModelSpec | None = None

    @property
    def exact(self) -> bool:
        """Whether exact dedup runs (near dedup removes exact copies first)."""
        return self.flags.dedup in ("exact", "near")

    @property
    def fixed_shards(self) -> int:
        """--num_shards; 0: as many as `shard_size` gives."""
        return self.flags.num_shards or 0


def resolve(opts: PrepareOptions) -> Settings:
    """One clear sentence for each flag value or combination that cannot work (the bounds
    declared on `PrepareFlags`' fields, then the rules across flags); else the `Settings`."""
    sources_given = sum(bool(x) for x in (opts.input, opts.sources, opts.splits, opts.hf_dataset))
    if sources_given != 1:
        raise FlagError("give exactly one of --input, --sources, --splits or --hf_dataset")
    if not opts.tokenizer or not opts.output_dir:
        raise FlagError("--tokenizer and --output_dir are required")
    inputs, splits = _inputs_and_splits(opts)  # a split named twice is refused here
    if problem := flags.out_of_bounds(PrepareFlags, opts):
        raise FlagError(problem)
    fractions = opts.validation_fraction + opts.test_fraction
    if not 0 <= fractions < 1 or opts.validation_fraction < 0 or opts.test_fraction < 0:
        raise FlagError("--validation_fraction + --test_fraction must be in [0, 1)")
    if fractions and not (opts.input or opts.sources):
        raise FlagError(
            "--validation_fraction/--test_fraction split --input documents; "
            "--splits and --hf_dataset already name their splits"
        )
    if opts.min_mean_word_length > opts.max_mean_word_length:
        raise FlagError("--min_mean_word_length must not exceed --max_mean_word_length")
    for split in splits:  # each one a folder directly inside OUT
        prepared_dir.check_split_name(split)
    return Settings(
        flags.from_values(PrepareFlags, opts),
        inputs,
        splits,
        quality_config(opts),
        near_config(opts) if opts.dedup == "near" else None,
        _shard_size(opts),
        _mixture(opts),
        decontamination.parse(flags.from_values(decontamination.DecontamConfig, opts)),
        quality_models.parse(flags.from_values(quality_models.QualityModelConfig, opts)),
    )


def _mixture(opts: PrepareOptions) -> mixture.MixtureSpec | None:
    """The checked --sources spec, or None; the flags that weigh sources need it."""
    if not opts.sources:
        weighing = opts.weights or opts.temperature is not None or opts.max_repeats != "1"
        if weighing:
            raise FlagError("--weights, --temperature and --max_repeats weigh --sources")
        return None
    return mixture.parse(opts.sources, opts.weights, opts.temperature, opts.max_repeats)


def _inputs_and_splits(opts: PrepareOptions) -> tuple[tuple, tuple[str, ...]]:
    """`Settings.inputs` and `Settings.splits`."""
    if opts.splits:
        globs = parse_splits(opts.splits)
        return tuple(globs.items()), tuple(globs)
    if opts.hf_dataset:
        return (), tuple(input_spec.hf_split_list(opts.hf_splits))
    fractions = (("validation", opts.validation_fraction), ("test", opts.test_fraction))
    splits = ("train", *(name for name, share in fractions if share))
    if opts.sources:  # listed per source (`mixture.with_files`)
        return (), splits
    return ((None, opts.input),), splits


def near_config(opts: PrepareOptions) -> minhash.MinHashConfig:
    return flags.from_values(minhash.MinHashConfig, opts)


def quality_config(opts: PrepareOptions) -> quality.QualityConfig | None:
    """The quality rules' thresholds, or None with --quality_filter none."""
    if opts.quality_filter == "none":
        return None
    return flags.from_values(quality.QualityConfig, opts)


def check_known(argv: list[str]) -> None:
    """Stops the launcher on an argument that neither prepare nor Beam recognises (Beam
    itself only logs "Discarding unparseable args" and runs with the defaults)."""
    parser = flags.ArgumentParser(prog=PROG, add_help=False)  # --help: `help_text`
    # Every options class's flags, as Beam's own parser gathers them (get_all_options):
    # prepare's among them, each class adding its own through its documented hook.
    for options_class in {str(c): c for c in PipelineOptions.__subclasses__()}.values():
        options_class._add_argparse_args(parser)
    _, unknown = parser.parse_known_args(argv)
    if unknown:
        raise FlagError(flags.unknown_argument(unknown, parser.known_flags()))


def help_text() -> str:
    """`--help`: prepare's own flags (Beam's PipelineOptions would print an empty usage)."""
    parser = flags.ArgumentParser(
        prog=PROG,
        description="Tokenize a corpus into shuffled, sharded TFRecords plus a manifest.",
        epilog="Every Apache Beam pipeline option is accepted as well (--runner, --project, "
        "--region, --temp_location, --max_num_workers, --setup_file, "
        "--direct_num_workers, ...); any other argument stops the run.",
    )
    flags.add_flags(parser, PrepareFlags)
    return parser.format_help()


def check_inputs(output_dir: str, files_by_split: dict[str, list[str]]) -> None:
    """No input file in two splits, and none inside --output_dir (which a run cleans);
    paths are compared by what they name (`fs.identity`), not as strings, so
    `dir/./a.jsonl`, `dir//a.jsonl` or a symlink is the same file as `dir/a.jsonl`."""
    seen = {}
    out = fs.identity(output_dir).rstrip("/") + "/"
    for split, files in files_by_split.items():
        for path in files:
            same = fs.identity(path)
            if same in seen and seen[same][0] != split:
                first, spelled = seen[same]
                also = f" (there as {spelled})" if spelled != path else ""
                raise FlagError(
                    f"{path} matches the --splits globs of both {first!r}{also} "
                    f"and {split!r}; make the globs disjoint"
                )
            seen.setdefault(same, (split, path))
            if same.startswith(out):
                raise FlagError(
                    f"input {path} lies inside --output_dir {output_dir}; "
                    "write the output somewhere else"
                )


def check_tokenizer(tokenizer, max_length: int) -> None:
    """The sequence length must leave room for content after the special tokens."""
    specials = tokenizer.num_special_tokens_to_add(is_pair=False)
    if max_length <= specials:
        raise FlagError(
            f"--max_length {max_length} leaves no room for text: the tokenizer "
            f"adds {specials} special tokens to every sequence"
        )


def _shard_size(opts: PrepareOptions) -> int:
    if opts.shard_size:
        return opts.shard_size
    return max(1, DEFAULT_TARGET_SHARD_BYTES // (BYTES_PER_TOKEN_ESTIMATE * opts.max_length))


def parse_splits(spec: str) -> dict[str, str]:
    """'train=a/*.txt;validation=b.txt' -> {'train': 'a/*.txt', 'validation': 'b.txt'}"""
    out = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        name, sep, pattern = part.partition("=")
        if not sep or not name or not pattern:
            raise FlagError(f"--splits entry {part!r} is not NAME=GLOB")
        if name.strip() in out:
            raise FlagError(
                f"--splits names the split {name.strip()!r} twice; join its "
                "globs with commas: NAME=GLOB1,GLOB2"
            )
        out[name.strip()] = pattern.strip()
    return out
