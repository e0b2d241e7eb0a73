"""All flags of the prepare pipeline, as Beam `PipelineOptions` (one typed place).

Every standard Beam flag (`--runner`, `--direct_num_workers`, `--max_num_workers`,
`--sdk_container_image`, `--setup_file`, ...) passes through untouched.
"""

from __future__ import annotations

import argparse
import dataclasses

from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipelines import minhash, quality, sources
from beam_pipelines import input_spec
from beam_pipelines.input_spec import InputSpec
from common.errors import UserError
from common import flags, fs, prepared_dir
from common.flags import add_flags

DEFAULT_TARGET_SHARD_BYTES = 150_000_000
# A record of L int64 ids is ~L * (2-3 varint bytes + 1 mask byte) + ~20 bytes; 4 bytes a
# token is a slight overestimate for vocabularies under 2**21, so shards land at ~100-150 MB.
BYTES_PER_TOKEN_ESTIMATE = 4


class PrepareOptions(PipelineOptions):
    @classmethod
    def flag_names(cls) -> list[str]:
        """The names of this pipeline's own flags (not Beam's)."""
        parser = argparse.ArgumentParser(add_help=False)
        cls._add_argparse_args(parser)
        return sorted(vars(parser.parse_args([])))

    @classmethod
    def _add_argparse_args(cls, parser):
        add = parser.add_argument
        add_flags(parser, InputSpec)  # --input, --text_field, --hf_dataset, ... (shared)
        add("--splits", default=None,
            help="inputs that already form splits: 'train=GLOB;validation=GLOB;test=GLOB'")
        add("--validation_fraction", type=float, default=0.0,
            help="share of --input documents hashed into 'validation' (deterministic)")
        add("--test_fraction", type=float, default=0.0,
            help="share of --input documents hashed into 'test' (deterministic)")
        add("--tokenizer", required=False, default=None,
            help="folder (local or gs://) with tokenizer.json from train_tokenizer")
        add("--output_dir", default=None, help="where split folders go (local or gs://)")
        add("--max_length", type=int, default=128, help="tokens per sequence")
        add("--shard_size", type=int, default=0,
            help="records per shard; 0 = sized for ~150 MB shards")
        add("--num_shards", type=int, default=None,
            help="number of shards per split (overrides --shard_size); fewer when some "
                 "shards' key ranges hold no row: no empty shard is written")
        add("--pad_tail", action="store_true",
            help="pad the last partial sequence of each split instead of dropping it")
        add("--read_range_bytes", type=int, default=sources.DEFAULT_RANGE_BYTES,
            help="uncompressed .jsonl / line .txt files larger than this are read in "
                 "parallel byte ranges")
        add("--tokenize_batch_chars", type=int, default=1_000_000,
            help="characters handed to the fast tokenizer per encode_batch call")
        add("--seed", type=int, default=0, help="seed of the deterministic shuffle")
        add("--max_rejected_fraction", type=float, default=0.1,
            help="refuse to commit when more than this share of the documents is rejected "
                 "(1.0 turns the check off)")
        add("--max_filtered_fraction", type=float, default=0.1,
            help="refuse to commit when the quality filter removes more than this share of "
                 "the documents: rules that do not fit a corpus's language (1.0 turns the "
                 "check off)")
        add("--takeover_lock", action="store_true",
            help="take the output folder over from a run that holds its lock (only when "
                 "that run is dead)")
        add("--lock_timeout_hours", type=float, default=1.0,
            help="a lock whose heartbeat (refreshed every minute while its run lives) is "
                 "older than this is taken over without --takeover_lock; a lock whose "
                 "Dataflow job still runs is kept, whatever its age")
        add("--progress_seconds", type=float, default=10.0,
            help="seconds between progress lines on the local runner (0 = none; on "
                 "Dataflow the job's console shows progress)")
        add("--dedup", choices=("none", "exact", "near"), default="exact",
            help="exact: keep one copy of documents with the same normalised text (zero-width "
                 "characters and soft hyphens removed, NFKC, casefolded, whitespace collapsed), the first in input order, across all "
                 "inputs and splits; near: also drop documents whose MinHash estimate of "
                 "word 5-gram Jaccard with an earlier one is >= --near_threshold "
                 "(beam_pipelines/dedup.py, minhash.py)")
        add_flags(parser, minhash.MinHashConfig)
        add("--quality_filter", choices=("none", "basic"), default="basic",
            help="drop degenerate documents by the rules of beam_pipelines/quality.py "
                 "(thresholds: the --min_words ... --max_top_4gram_fraction flags)")
        add_flags(parser, quality.QualityConfig)
        add("--removed_sample_size", type=int, default=20,
            help="removed documents written per rule (and duplicate kind) to "
                 f"OUT/{prepared_dir.DEAD_LETTER_DIR}/*-{prepared_dir.SAMPLE_KIND} (the first "
                 "ones in input order; 0 = none)")


class FlagError(UserError):
    """A flag value or combination that cannot work; nothing has been touched yet."""


# (flag, smallest allowed value): numbers that must be positive or non-negative.
_MINIMUMS = (("max_length", 8), ("seed", 0), ("num_shards", 1), ("shard_size", 0),
             ("read_range_bytes", 1), ("max_document_bytes", 1), ("tokenize_batch_chars", 1),
             ("lock_timeout_hours", 0.05), ("progress_seconds", 0), ("min_words", 0),
             ("min_mean_word_length", 0), ("removed_sample_size", 0), ("near_ngram", 1),
             ("near_bands", 1), ("near_rows", 1), ("near_max_bucket", 2))
# Thresholds that are shares, in [0, 1] (for a quality rule, 1 turns it off).
_SHARES = ("near_threshold", "max_non_alnum_fraction", "max_duplicate_line_chars",
           "max_top_2gram_fraction", "max_top_3gram_fraction", "max_top_4gram_fraction")


def check(opts: PrepareOptions) -> None:
    """One clear sentence for each flag value or combination that cannot work."""
    sources_given = sum(bool(x) for x in (opts.input, opts.splits, opts.hf_dataset))
    if sources_given != 1:
        raise FlagError("give exactly one of --input, --splits or --hf_dataset")
    if not opts.tokenizer or not opts.output_dir:
        raise FlagError("--tokenizer and --output_dir are required")
    split_names(opts)  # a split named twice in --splits or --hf_splits is refused here
    for name, minimum in _MINIMUMS:
        value = getattr(opts, name)
        if value is not None and value < minimum:
            raise FlagError(f"--{name} must be at least {minimum} (got {value})")
    fractions = opts.validation_fraction + opts.test_fraction
    if not 0 <= fractions < 1 or opts.validation_fraction < 0 or opts.test_fraction < 0:
        raise FlagError("--validation_fraction + --test_fraction must be in [0, 1)")
    if fractions and not opts.input:
        raise FlagError("--validation_fraction/--test_fraction split --input documents; "
                        "--splits and --hf_dataset already name their splits")
    for name in ("max_rejected_fraction", "max_filtered_fraction"):
        if not 0 <= getattr(opts, name) <= 1:
            raise FlagError(f"--{name} must be in [0, 1]")
    for name in _SHARES:
        if not 0 <= getattr(opts, name) <= 1:
            raise FlagError(f"--{name} must be in [0, 1] (got {getattr(opts, name)})")
    if opts.min_mean_word_length > opts.max_mean_word_length:
        raise FlagError("--min_mean_word_length must not exceed --max_mean_word_length")


def near_config(opts: PrepareOptions) -> minhash.MinHashConfig:
    return minhash.MinHashConfig(**{f.name: getattr(opts, f.name)
                                    for f in dataclasses.fields(minhash.MinHashConfig)})


def quality_config(opts: PrepareOptions) -> quality.QualityConfig | None:
    """The quality rules' thresholds, or None with --quality_filter none."""
    if opts.quality_filter == "none":
        return None
    return quality.QualityConfig(**{f.name: getattr(opts, f.name)
                                    for f in dataclasses.fields(quality.QualityConfig)})


def check_known(argv: list[str]) -> None:
    """Stops the launcher on an argument that neither prepare nor Beam recognises (Beam
    itself only logs "Discarding unparseable args" and runs with the defaults)."""
    parsers = []
    PipelineOptions([]).get_all_options(add_extra_args_fn=parsers.append)  # Beam's parser
    _, unknown = parsers[0].parse_known_args(argv)
    if unknown:
        known = [name for action in parsers[0]._actions for name in action.option_strings]
        raise FlagError(flags.unknown_argument(unknown, known))


def help_text() -> str:
    """`--help`: prepare's own flags (Beam's PipelineOptions would print an empty usage)."""
    parser = flags.ArgumentParser(
        prog="python -m beam_pipelines.prepare",
        description="Tokenize a corpus into shuffled, sharded TFRecords plus a manifest.",
        epilog="Every Apache Beam pipeline option is accepted as well (--runner, --project, "
               "--region, --temp_location, --max_num_workers, --setup_file, "
               "--direct_num_workers, ...); any other argument stops the run.")
    PrepareOptions._add_argparse_args(parser)
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
                raise FlagError(f"{path} matches the --splits globs of both {first!r}{also} "
                                f"and {split!r}; make the globs disjoint")
            seen.setdefault(same, (split, path))
            if same.startswith(out):
                raise FlagError(f"input {path} lies inside --output_dir {output_dir}; "
                                "write the output somewhere else")


def check_tokenizer(tokenizer, max_length: int) -> None:
    """The sequence length must leave room for content after the special tokens."""
    specials = tokenizer.num_special_tokens_to_add(is_pair=False)
    if max_length <= specials:
        raise FlagError(f"--max_length {max_length} leaves no room for text: the tokenizer "
                        f"adds {specials} special tokens to every sequence")


def shard_size(opts: PrepareOptions) -> int:
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
            raise FlagError(f"--splits names the split {name.strip()!r} twice; join its "
                            "globs with commas: NAME=GLOB1,GLOB2")
        out[name.strip()] = pattern.strip()
    return out


def split_names(opts: PrepareOptions) -> list[str]:
    """The splits this run writes, in a stable order."""
    if opts.splits:
        return list(parse_splits(opts.splits))
    if opts.hf_dataset:
        return input_spec.hf_split_list(opts.hf_splits)
    names = ["train"]
    if opts.validation_fraction:
        names.append("validation")
    if opts.test_fraction:
        names.append("test")
    return names
