"""Command-line flags generated from typed dataclasses: one rule for every command.

A field declared with `flag(...)` becomes `--name` (plus aliases) with its type, default,
choices and help; `bool` fields are switches; `dict` fields take JSON. A field type this
module does not know is an error when the parser is built, never a silent `str`.

Example:
    >>> @dataclasses.dataclass
    ... class Config:
    ...     steps: int = flag("Optimizer steps.", 100)
    >>> parse(argparse.ArgumentParser(), Config, ["--steps", "7"]).steps
    7
"""

from __future__ import annotations

import argparse
import dataclasses
import json

_TYPES = {"int": int, "float": float, "str": str, "dict": json.loads}


def flag(help: str, default=None, aliases=(), choices=None, required=False):
    """A dataclass field that is also a command-line flag."""
    meta = dict(help=help, aliases=tuple(aliases), choices=choices, required=required)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(field: dataclasses.Field) -> str:
    name = field.type if isinstance(field.type, str) else field.type.__name__
    return name.replace(" | None", "").replace("None | ", "")


def add_flags(parser, cls) -> None:
    """Adds every `flag` field of the dataclass `cls` to an argparse parser (Beam's
    PipelineOptions parsers included)."""
    for field in dataclasses.fields(cls):
        meta, name = field.metadata, _type_name(field)
        if "help" not in meta:
            continue
        names = ["--" + field.name, *meta["aliases"]]
        if name == "bool":
            parser.add_argument(*names, dest=field.name, action="store_true",
                                help=meta["help"])
            continue
        if name not in _TYPES:
            raise TypeError(f"flag --{field.name}: no parser for type {field.type!r}")
        text = meta["help"]
        if field.default not in (None, dataclasses.MISSING):
            text = f"{text.rstrip('.')}. Default: {field.default}."
        parser.add_argument(*names, dest=field.name, type=_TYPES[name], default=field.default,
                            choices=meta["choices"], required=meta["required"], help=text)


def parse(parser: argparse.ArgumentParser, cls, argv=None):
    """Parses `argv` into `cls`; a ValueError from the dataclass is argparse's one-line
    usage error (exit 2)."""
    add_flags(parser, cls)
    args = parser.parse_args(argv)
    try:
        return cls(**vars(args))
    except ValueError as err:
        parser.error(str(err))
