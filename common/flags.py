"""Command-line flags generated from typed dataclasses: one rule for every command.

A field declared with `flag(...)` becomes `--name` (plus aliases) with its type, default,
choices and help; `bool` fields are switches; `dict` fields take JSON. A field type this
module does not know is an error when the parser is built, never a silent `str`. Bounds
are declared on the field too (`minimum=`, `maximum=`; `out_of_bounds` checks them), and a
`group(Other)` field composes another flag dataclass into one command line.

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
import difflib
import json
import re
import sys

from common.errors import UserError

_TYPES = {"int": int, "float": float, "str": str, "dict": json.loads}


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the rules every command shares: no prefix abbreviations (a typo must not
    quietly match another flag), and a usage error is one line naming the closest flag, exit 2.

    Example:
        >>> ArgumentParser(prog="x").parse_args(["--max_lenght", "5"])  # exits 2:
        error: unknown argument --max_lenght (did you mean --max_length?); see x --help
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if "prog" not in kwargs and main_spec is not None:  # run as `python -m package.module`
            kwargs["prog"] = f"python -m {main_spec.name}"
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        # An unknown flag is reported before a missing required one: a typo in a required
        # flag's name is then named as the typo it is.
        args = sys.argv[1:] if args is None else list(args)
        required = [a for a in self._actions if a.option_strings and a.required]
        for action in required:
            action.required = False
        self._probing = True
        try:
            _, unknown = super().parse_known_args(args, argparse.Namespace())
        except _ProbeError:
            unknown = []  # a bad value: the full parse below reports it
        finally:
            self._probing = False
            for action in required:
                action.required = True
        if unknown:
            self.error("unrecognized arguments: " + " ".join(unknown))
        return super().parse_args(args, namespace)

    def known_flags(self) -> list[str]:
        return [name for action in self._actions for name in action.option_strings]

    def error(self, message):
        if getattr(self, "_probing", False):
            raise _ProbeError(message)
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        if unknown:
            message = unknown_argument(unknown.group(1).split(), self.known_flags())
        self.exit(2, f"error: {message}; see {self.prog} --help\n")


class _ProbeError(Exception):
    pass


def unknown_argument(unknown: list[str], known: list[str]) -> str:
    """One sentence about the first argument no parser recognised, with the closest flag."""
    arg = next((a for a in unknown if a.startswith("-")), unknown[0])
    if not arg.startswith("-"):
        return f"unexpected argument {arg!r}"
    name = arg.split("=", 1)[0]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown argument {name}{hint}"


BOUNDS = ("minimum", "maximum", "greater_than", "less_than")


def flag(help: str, default=None, aliases=(), choices=None, required=False, **bounds):
    """A dataclass field that is also a command-line flag. `bounds` are among BOUNDS:
    `minimum` and `maximum` inclusive, `greater_than` and `less_than` exclusive (a rate that
    must not be 0, a beta that must stay below 1); `out_of_bounds` checks them (a flag left at
    None is not checked)."""
    unknown = sorted(set(bounds) - set(BOUNDS))
    if unknown:
        raise TypeError(f"flag() takes bounds among {BOUNDS}, not {unknown}")
    meta = dict(
        help=help,
        aliases=tuple(aliases),
        choices=choices,
        required=required,
        **{name: bounds.get(name) for name in BOUNDS},
    )
    return dataclasses.field(default=default, metadata=meta)


def resolve(flags_object, **values) -> None:
    """Sets resolved values on a frozen flags dataclass, from its own `__post_init__` only: the
    flags are resolved once, when parsed, and never change afterwards."""
    for name, value in values.items():
        object.__setattr__(flags_object, name, value)


def group(cls):
    """A field holding the flag dataclass `cls`: its flags join the outer command line
    (flat, as if declared there), its values come back as one `cls` (`from_values`)."""
    return dataclasses.field(default_factory=cls, metadata=dict(group=cls))


def flag_fields(cls) -> list[dataclasses.Field]:
    """The `flag` fields of the dataclass `cls`, those of its `group` fields in their place."""
    found = []
    for field in dataclasses.fields(cls):
        if "group" in field.metadata:
            found += flag_fields(field.metadata["group"])
        elif "help" in field.metadata:
            found.append(field)
    return found


def from_values(cls, values):
    """`cls` built from an object holding its flags as attributes, flat (an argparse
    Namespace, Beam's PipelineOptions), `group` fields included."""
    kwargs = {}
    for field in dataclasses.fields(cls):
        if "group" in field.metadata:
            kwargs[field.name] = from_values(field.metadata["group"], values)
        elif "help" in field.metadata:
            kwargs[field.name] = getattr(values, field.name)
    return cls(**kwargs)


def _bounds(meta) -> tuple:
    """(low, high, low is exclusive, high is exclusive) of a field; None where unbounded."""
    low, high = meta.get("minimum"), meta.get("maximum")
    low_open, high_open = meta.get("greater_than") is not None, meta.get("less_than") is not None
    return (
        meta["greater_than"] if low_open else low,
        meta["less_than"] if high_open else high,
        low_open,
        high_open,
    )


def _inside(value, low, high, low_open, high_open) -> bool:
    above = low is None or (value > low if low_open else value >= low)
    return above and (high is None or (value < high if high_open else value <= high))


def bounds_text(meta) -> str | None:
    """The bounds of a field in words ("at least 1", "in (0, 1]"), or None if unbounded."""
    low, high, low_open, high_open = _bounds(meta)
    if low is None and high is None:
        return None
    if high is None:
        return f"greater than {low}" if low_open else f"at least {low}"
    if low is None:
        return f"less than {high}" if high_open else f"at most {high}"
    return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def out_of_bounds(cls, values, label: str = "--{}") -> str | None:
    """One sentence about the first flag of `cls` whose value in `values` (attributes, flat)
    lies outside the bounds declared on its field, or None; `label` names the field."""
    for field in flag_fields(cls):
        value = getattr(values, field.name)
        if value is None or _inside(value, *_bounds(field.metadata)):
            continue
        return f"{label.format(field.name)} must be {bounds_text(field.metadata)} (got {value})"
    return None


def _type_name(field: dataclasses.Field) -> str:
    name = field.type if isinstance(field.type, str) else field.type.__name__
    return name.replace(" | None", "").replace("None | ", "")


def add_flags(parser, cls) -> None:
    """Adds every `flag` field of the dataclass `cls` (`group` fields' included) to an
    argparse parser (Beam's PipelineOptions parsers included)."""
    for field in flag_fields(cls):
        meta, name = field.metadata, _type_name(field)
        names = ["--" + field.name, *meta["aliases"]]
        if name == "bool":
            parser.add_argument(*names, dest=field.name, action="store_true", help=meta["help"])
            continue
        if name not in _TYPES:
            raise TypeError(f"flag --{field.name}: no parser for type {field.type!r}")
        text = meta["help"]
        if field.default not in (None, dataclasses.MISSING):
            text = f"{text.rstrip('.')}. Default: {field.default}."
        parser.add_argument(
            *names,
            dest=field.name,
            type=_TYPES[name],
            default=field.default,
            choices=meta["choices"],
            required=meta["required"],
            help=text,
        )


def parse(parser: argparse.ArgumentParser, cls, argv=None):
    """Parses `argv` into `cls`; a ValueError or UserError from the dataclass is a one-line
    usage error (exit 2) when `parser` is an `ArgumentParser` of this module."""
    add_flags(parser, cls)
    args = parser.parse_args(argv)
    try:
        return from_values(cls, args)
    except (ValueError, UserError) as err:
        parser.error(str(err).rstrip("."))  # the line goes on: "; see ... --help"


def parse_command(prog: str, description: str, commands: dict, argv: list):
    """For a tool of several commands (`prog NAME FLAGS...`): (NAME, its dataclass in
    `commands` parsed from FLAGS), or None after a usage line on stderr when NAME is missing
    or not one of `commands` (the caller exits 2)."""
    if not argv or argv[0] not in commands:
        print(f"usage: python -m {prog} {{{','.join(commands)}}} ... (--help)", file=sys.stderr)
        return None
    parser = ArgumentParser(prog=f"{prog} {argv[0]}", description=description)
    return argv[0], parse(parser, commands[argv[0]], argv[1:])


def companions_changed(cls, config) -> list[str]:
    """The `--name`s of `cls`'s fields after its first (the flag they accompany) whose value
    in `config` is not the default: they need that first flag."""
    return [f"--{f.name}" for f in flag_fields(cls)[1:] if getattr(config, f.name) != f.default]
