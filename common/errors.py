"""One kind of error for mistakes a user can fix, and the one way commands report them.

A `UserError` (bad flags, data that does not fit the model, a path that holds no model...)
is printed as one line, `error: ...`, with exit status 2; so is a missing file that the user
named on the command line (or one inside a folder they named). Everything else is a bug or an
infrastructure failure and keeps its traceback: a missing file the program itself chose is
news for a developer, not a usage error.

`UserError` is deliberately not a `ValueError`: code that treats `ValueError` as "bad bytes"
(e.g. the prepare pipeline's readers, which dead-letter unparsable input) must not swallow a
mistake in the command.

SIGTERM (what `kill`, `timeout`, CI runners and container stops send) is handled like Ctrl-C
while a command runs: it raises `Terminated` in the main thread, so every `finally` and `with`
block cleans up (temporary folders, the output's lock) before the command exits with status
143 (128 + 15, the shell's code for a SIGTERM death). A second SIGTERM during that clean-up is
ignored; SIGKILL still stops the process at once.

Example:
    >>> def main(argv=None) -> int:
    ...     return run_cli(lambda: _main(argv), argv)
"""

from __future__ import annotations

import contextlib
import posixpath
import signal
import sys
import threading
from typing import Callable, Sequence


class UserError(Exception):
    """A mistake in the command's input; the message is one sentence that says what to do."""


TERMINATED_STATUS = 128 + signal.SIGTERM


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException, like KeyboardInterrupt: an `except Exception` that
    turns bad records into dead letters must not swallow it."""


def _raise_terminated(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one clean-up, not one per signal
    raise Terminated(f"stopped by signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def sigterm_raises():
    """While the block runs, SIGTERM raises `Terminated` in the main thread (a handler can
    only be installed there; elsewhere the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    missing file the user named, becomes one line on stderr and exit status 2; SIGTERM, once
    everything cleaned up, one line and status 143."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        with sigterm_raises():
            return body() or 0
    except Terminated as err:
        print(f"error: {err}; temporary files removed, nothing half-written kept",
              file=sys.stderr)
        return TERMINATED_STATUS
    except UserError as err:
        print(f"error: {str(err).strip()}", file=sys.stderr)
        return 2
    except FileNotFoundError as err:
        if not named_by_user(err.filename, argv):
            raise
        print(f"error: {err.filename} does not exist.", file=sys.stderr)
        return 2
