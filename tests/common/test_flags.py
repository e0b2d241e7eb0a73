"""The dataclass -> flags helper that every command line uses."""

import argparse
import dataclasses

import pytest

from common.flags import flag, parse


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
    config = parse(argparse.ArgumentParser(), _Config,
                   ["--steps", "3", "--old_name", "x", "--fast", "--extra", '{"a": 1}'])
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
