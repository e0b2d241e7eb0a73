"""The dataclass -> flags helper that every command line uses."""

import argparse
import dataclasses
import importlib

import pytest

from common.flags import (
    ArgumentParser,
    flag,
    flag_fields,
    group,
    out_of_bounds,
    parse,
    parse_command,
)


@dataclasses.dataclass
class _Config:
    steps: int = flag("Steps.", 10)
    rate: float = flag("Rate.", 0.5)
    name: str = flag("Name.", aliases=["--old_name"])
    fast: bool = flag("Switch.", False)
    extra: dict = flag("JSON.")

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError("--steps must be at least 1")


def test_types_defaults_aliases_and_json():
    config = parse(
        argparse.ArgumentParser(),
        _Config,
        ["--steps", "3", "--old_name", "x", "--fast", "--extra", '{"a": 1}'],
    )
    assert config == _Config(steps=3, rate=0.5, name="x", fast=True, extra={"a": 1})


def test_a_dataclass_error_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(argparse.ArgumentParser(), _Config, ["--steps", "0"])
    assert exit_info.value.code == 2 and "--steps must be at least 1" in capsys.readouterr().err


def test_an_unknown_type_fails_when_the_parser_is_built():
    @dataclasses.dataclass
    class Bad:
        items: list = flag("A list.")

    with pytest.raises(TypeError, match="no parser for type"):
        parse(argparse.ArgumentParser(), Bad, [])


def test_a_typo_is_one_line_with_the_closest_flag_even_before_a_missing_required_one(capsys):
    parser = ArgumentParser(prog="cmd")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--max_length", type=int)
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--max_lenght", "5"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err == (
        "error: unknown argument --max_lenght (did you mean --max_length?); see cmd --help\n"
    )


def test_no_prefix_abbreviation_and_bad_values_reported_once(capsys):
    parser = ArgumentParser(prog="cmd")
    parser.add_argument("--max_length", type=int)
    with pytest.raises(SystemExit):
        parser.parse_args(["--max_len", "5"])  # argparse's default would accept this prefix
    assert "unknown argument --max_len " in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["--max_length", "five"])
    assert capsys.readouterr().err.count("invalid int value") == 1


# Every command's entry point with a typo'd flag: (module, main function, argv).
_TYPOS = [
    (
        "beam_pipelines.prepare",
        "run",
        ["--input", "x", "--tokenizer", "t", "--output_dir", "o", "--max_lenght", "512"],
        "--max_length",
    ),
    (
        "beam_pipelines.train_tokenizer",
        "main",
        ["--input", "x", "--output_dir", "o", "--vocab_sise", "5"],
        "--vocab_size",
    ),
    (
        "trainer.pretraining.task",
        "main",
        ["--train_data", "x", "--eval_data", "y", "--output_dir", "o", "--leraning_rate", "1"],
        "--learning_rate",
    ),
    (
        "trainer.release.export",
        "main",
        ["--checkpoint", "c", "--output_dir", "o", "--fromat", "hf"],
        "--format",
    ),
    ("trainer.release.predict", "main", ["--model", "m", "--top-k", "3", "a <mask>"], "--top_k"),
]


@pytest.mark.parametrize("module,function,argv,closest", _TYPOS, ids=[t[0] for t in _TYPOS])
def test_every_command_stops_on_a_typo_before_doing_anything(
    module, function, argv, closest, capsys
):
    main = getattr(importlib.import_module(module), function)
    try:
        status = main(argv)
    except SystemExit as exit_info:
        status = exit_info.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1 and f"(did you mean {closest}?)" in err[0], err


@dataclasses.dataclass
class _Inner:
    rows: int = flag("Rows.", 8, minimum=1)
    share: float = flag("Share.", 0.5, minimum=0, maximum=1)


@dataclasses.dataclass
class _Outer:
    first: str = flag("First.")
    inner: _Inner = group(_Inner)
    cap: int = flag("Cap.", 3, maximum=5)


def test_a_group_joins_the_command_line_flat_and_comes_back_nested():
    parser = ArgumentParser(prog="cmd")
    config = parse(parser, _Outer, ["--rows", "2", "--first", "a"])
    assert config == _Outer(first="a", inner=_Inner(rows=2), cap=3)
    assert [f.name for f in flag_fields(_Outer)] == ["first", "rows", "share", "cap"]
    assert "--share" in parser.format_help()


@pytest.mark.parametrize(
    "values, message",
    [
        ({}, None),
        ({"rows": 0}, "--rows must be at least 1 (got 0)"),
        ({"share": 1.5}, "--share must be in [0, 1] (got 1.5)"),
        ({"share": -0.1}, "--share must be in [0, 1] (got -0.1)"),
        ({"cap": 6}, "--cap must be at most 5 (got 6)"),
        ({"rows": None}, None),  # a flag not given is not checked
    ],
)
def test_bounds_declared_on_fields_are_checked_with_one_sentence(values, message):
    given = argparse.Namespace(**({"first": None, "rows": 8, "share": 0.5, "cap": 3} | values))
    assert out_of_bounds(_Outer, given) == message


@dataclasses.dataclass
class _Open:
    rate: float = flag("Rate.", 0.1, greater_than=0, maximum=1)
    beta: float = flag("Beta.", 0.9, minimum=0, less_than=1)
    step: float = flag("Step.", 1.0, greater_than=0)


@pytest.mark.parametrize(
    "values, message",
    [
        ({}, None),
        ({"rate": 1}, None),
        ({"rate": 0}, "--rate must be in (0, 1] (got 0)"),
        ({"beta": 0}, None),
        ({"beta": 1.0}, "--beta must be in [0, 1) (got 1.0)"),
        ({"step": -1.0}, "--step must be greater than 0 (got -1.0)"),
    ],
)
def test_exclusive_bounds_refuse_the_bound_itself(values, message):
    given = argparse.Namespace(**({"rate": 0.1, "beta": 0.9, "step": 1.0} | values))
    assert out_of_bounds(_Open, given) == message


def test_a_label_names_what_is_out_of_bounds():
    given = argparse.Namespace(rate=2, beta=0.9, step=1.0)
    assert out_of_bounds(_Open, given, label="--config {!r}") == (
        "--config 'rate' must be in (0, 1] (got 2)"
    )


def test_parse_command_picks_the_commands_dataclass_or_prints_usage(capsys):
    @dataclasses.dataclass
    class Build:
        steps: int = flag("steps", 3, minimum=1)

    commands = {"build": Build, "report": Build}
    assert parse_command("tool", "A tool.", commands, ["build", "--steps", "5"]) == (
        "build",
        Build(5),
    )
    for argv in ([], ["bogus"]):
        assert parse_command("tool", "A tool.", commands, argv) is None
        assert capsys.readouterr().err == "usage: python -m tool {build,report} ... (--help)\n"
