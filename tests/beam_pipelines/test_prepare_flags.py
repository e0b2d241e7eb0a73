"""prepare's flags come from one dataclass, `options.PrepareFlags`: Beam's options, `--help`,
the bounds `check` enforces, the recorded arguments and the flags' choices."""

import dataclasses

import pytest

from beam_pipelines import decontamination, dedup, minhash, options, prepare, quality
from beam_pipelines.input_spec import InputSpec
from common import flags

# Every bound of a prepare flag: (minimum, maximum), inclusive. The two split fractions are
# bounded together (their sum in [0, 1)), by code in `check`.
BOUNDS = {
    "max_document_bytes": (1, None),
    "max_length": (8, None),
    "shard_size": (0, None),
    "num_shards": (1, None),
    "read_range_bytes": (1, None),
    "tokenize_batch_chars": (1, None),
    "seed": (0, None),
    "max_rejected_fraction": (0, 1),
    "max_filtered_fraction": (0, 1),
    "lock_timeout_hours": (0.05, None),
    "progress_seconds": (0, None),
    "near_ngram": (1, None),
    "near_bands": (1, None),
    "near_rows": (1, None),
    "near_threshold": (0, 1),
    "near_max_bucket": (2, None),
    "min_words": (0, None),
    "min_mean_word_length": (0, None),
    "max_non_alnum_fraction": (0, 1),
    "max_duplicate_line_chars": (0, 1),
    "max_top_2gram_fraction": (0, 1),
    "max_top_3gram_fraction": (0, 1),
    "max_top_4gram_fraction": (0, 1),
    "removed_sample_size": (0, None),
    "decontam_ngram": (1, None),
    "decontam_min_words": (1, None),
    "quality_max_tokens": (1, None),
    "quality_batch_size": (1, None),
}
_GIVEN = ["--input", "x.jsonl", "--tokenizer", "tok", "--output_dir", "out"]


def _fields():
    return {f.name: f for f in flags.flag_fields(options.PrepareFlags)}


def test_every_bound_is_declared_on_its_field():
    declared = {
        name: (f.metadata["minimum"], f.metadata["maximum"])
        for name, f in _fields().items()
        if (f.metadata["minimum"], f.metadata["maximum"]) != (None, None)
    }
    assert declared == BOUNDS


def _outside(name):
    """Values just outside the field's bounds, as the user would type them."""
    low, high = BOUNDS[name]
    values = [] if low is None else [low - 1]
    return [str(v) for v in values + ([] if high is None else [high + 1])]


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_a_value_outside_a_declared_bound_is_refused_naming_the_flag(name):
    opts = prepare.pipeline_options(_GIVEN).view_as(options.PrepareOptions)
    options.resolve(opts)  # the defaults are within every bound
    for value in _outside(name):
        opts = prepare.pipeline_options([*_GIVEN, f"--{name}", value]).view_as(
            options.PrepareOptions
        )
        with pytest.raises(options.FlagError, match=f"^--{name} must be (at least|in) "):
            options.resolve(opts)


def test_help_lists_every_field_of_the_dataclass_and_the_ones_it_composes():
    text = options.help_text()
    names = set(_fields())
    for composed in (InputSpec, minhash.MinHashConfig, quality.QualityConfig):
        assert {f.name for f in dataclasses.fields(composed)} <= names
    for name in names:
        assert f"--{name} " in text or f"--{name}\n" in text, name
    assert options.PrepareOptions.flag_names() == sorted(names)


def test_choices_come_from_the_modules_that_own_them():
    assert _fields()["dedup"].metadata["choices"] == dedup.MODES
    assert _fields()["quality_filter"].metadata["choices"] == quality.FILTERS
    assert _fields()["decontam_action"].metadata["choices"] == decontamination.ACTIONS


def test_the_configs_come_from_the_dataclass_fields():
    opts = prepare.pipeline_options([*_GIVEN, "--near_rows", "4", "--min_words", "9"]).view_as(
        options.PrepareOptions
    )
    assert options.near_config(opts) == minhash.MinHashConfig(near_rows=4)
    assert options.quality_config(opts) == quality.QualityConfig(min_words=9)


@pytest.mark.parametrize(
    "argv, closest",
    [
        (["--direct_num_worker", "2"], "--direct_num_workers"),  # Beam's
        (["--near_thresold", "0.5"], "--near_threshold"),  # prepare's
    ],
)
def test_an_unknown_argument_names_the_closest_flag_of_beam_or_prepare(argv, closest, capsys):
    assert prepare.run([*_GIVEN, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"(did you mean {closest}?)" in err[0], err


def test_a_bad_value_is_one_line_not_beams_whole_usage(capsys):
    with pytest.raises(SystemExit) as exit_info:
        prepare.run([*_GIVEN, "--max_length", "five"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2
    assert len(err) == 1 and "--max_length: invalid int value: 'five'" in err[0], err


def test_beam_flags_and_aliases_are_known():
    options.check_known(
        [
            *_GIVEN,
            "--hf_split",
            "train",
            "--experiment",
            "x",
            "--runner=FnApiRunner",
            "--no_pipeline_type_check",
        ]
    )
