"""One kind of error for mistakes a user can fix, and the one way commands report them.

A `UserError` (bad flags, data that does not fit the model, a path that holds no model...)
is printed as one line, `error: ...`, with exit status 2; so is a missing file that the user
named on the command line (or one inside a folder they named). Everything else is a bug or an
infrastructure failure and keeps its traceback: a missing file the program itself chose is
news for a developer, not a usage error.

`UserError` is deliberately not a `ValueError`: code that treats `ValueError` as "bad bytes"
(e.g. the prepare pipeline's readers, which dead-letter unparsable input) must not swallow a
mistake in the command.

A full disk, a full quota or a read-only filesystem (and a permission refused on a path the
user named) is one line too, naming the path, with status 2: every writer here writes whole
files or folders (a temporary name, then a rename; on object stores one upload), so the
previous output is still there. The error is found anywhere in the exception's chain: Beam
wraps a worker's OSError in a RuntimeError.

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
import errno
import logging
import posixpath
import signal
import sys
import threading
from collections.abc import Callable, Sequence

from common import staging


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
        if value and (
            filename == value
            or filename.startswith(value + "/")
            or posixpath.normpath(filename) == posixpath.normpath(value)
        ):
            return True
    return False


# errno -> what the user reads. Those of the first group mean "cannot write" wherever they
# happen; a refused permission only when the path is one the user named (elsewhere: a bug).
_NO_ROOM = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
}
_REFUSED = {errno.EACCES: "permission denied", errno.EPERM: "operation not permitted"}
_STAGED = staging.STAGED  # a staged write's temporary name: reported as its target's


def _in_chain(err: BaseException):
    """`err` and the exceptions it was raised from or while handling, innermost last."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def _flag_value(argv: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
    return None


def failed_write_message(err: BaseException, argv: Sequence[str]) -> str | None:
    """One line for a full disk or read-only output found in `err`'s chain, else None."""
    for cause in _in_chain(err):
        if not isinstance(cause, OSError):
            continue
        filename = cause.filename or _flag_value(argv, "--output_dir")
        if cause.errno in _REFUSED and named_by_user(filename, argv):
            reason = _REFUSED[cause.errno]
        elif cause.errno in _NO_ROOM:
            reason = _NO_ROOM[cause.errno]
        else:
            continue
        path = _STAGED.sub("", str(filename)) if filename else "the output"
        return (
            f"cannot write {path}: {reason}; the previous output (if any) is kept, "
            "nothing half-written is left"
        )
    return None


class _NoRoomRecords(logging.Filter):
    """Drops a log record whose exception is a full disk or a read-only filesystem."""

    def filter(self, record):
        err = record.exc_info[1] if record.exc_info else None
        return err is None or failed_write_message(err, ()) is None


@contextlib.contextmanager
def no_room_logged_once(*logger_names: str):
    """While the block runs, the named loggers drop the tracebacks of a full disk or a
    read-only filesystem: Beam logs a worker's error with its traceback before raising it,
    and `run_cli` then says it in one line."""
    quiet = _NoRoomRecords()
    loggers = [logging.getLogger(name) for name in logger_names]
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)


def run_cli(body: Callable[[], int | None], argv: Sequence[str] | None = None) -> int:
    """Runs a command (`argv`: its arguments, default `sys.argv[1:]`); a UserError, or a
    missing file the user named, or a full or read-only output, becomes one line on stderr
    and exit status 2; SIGTERM, once
    everything cleaned up, one line and status 143."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        with sigterm_raises():
            return body() or 0
    except Terminated as err:
        print(f"error: {err}; temporary files removed, nothing half-written kept", file=sys.stderr)
        return TERMINATED_STATUS
    except UserError as err:
        print(f"error: {str(err).strip()}", file=sys.stderr)
        return 2
    except FileNotFoundError as err:
        if not named_by_user(err.filename, argv):
            raise
        print(f"error: {err.filename} does not exist.", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 (anything else keeps its traceback)
        message = failed_write_message(err, argv)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 2
