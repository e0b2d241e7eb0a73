"""One kind of error for mistakes a user can fix, and the one way commands report them.

A `UserError` (bad flags, data that does not fit the model, a path that holds no model...)
is printed as one line, `error: ...`, with exit status 2; so is a missing file that the user
named on the command line (or one inside a folder they named). Everything else is a bug or an
infrastructure failure and keeps its traceback: a missing file the program itself chose is
news for a developer, not a usage error.

`UserError` is deliberately not a `ValueError`: code that treats `ValueError` as "bad bytes"
(e.g. the prepare pipeline's readers, which dead-letter unparsable input) must not swallow a
mistake in the command.

Example:
    >>> def main(argv=None) -> int:
    ...     return run_cli(lambda: _main(argv), argv)
"""

from __future__ import annotations

import posixpath
import sys
from typing import Callable, Sequence


class UserError(Exception):
    """A mistake in the command's input; the message is one sentence that says what to do."""


def _strip(path: str) -> str:
    return path.rstrip("/") or path


def named_by_user(filename, argv: Sequence[str]) -> bool:
    """Whether `filename` is a path given in `argv` (as a value or `--flag=value`), or lies
    inside one."""
    if not filename:
        return False
    filename = _strip(str(filename))
    for arg in argv:
        value = _strip(arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg)
        if value and (filename == value or filename.startswith(value + "/")
                      or posixpath.normpath(filename) == posixpath.normpath(value)):
            return True
    return False


def run_cli(body: Callable[[], int | None], argv: Sequence[str] | None = None) -> int:
    """Runs a command (`argv`: its arguments, default `sys.argv[1:]`); a UserError, or a
    missing file the user named, becomes one line on stderr and exit status 2."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        return body() or 0
    except UserError as err:
        print(f"error: {str(err).strip()}", file=sys.stderr)
        return 2
    except FileNotFoundError as err:
        if not named_by_user(err.filename, argv):
            raise
        print(f"error: {err.filename} does not exist.", file=sys.stderr)
        return 2
