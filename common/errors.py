"""One kind of error for mistakes a user can fix, and the one way commands report them.

A `UserError` (bad flags, data that does not fit the model, a path that holds no model...)
is printed as one line, `error: ...`, with exit status 2. Everything else is a bug or an
infrastructure failure and keeps its traceback.

Example:
    >>> def main(argv=None) -> int:
    ...     return run_cli(lambda: _main(argv))
"""

from __future__ import annotations

import sys
from typing import Callable


class UserError(ValueError):
    """A mistake in the command's input; the message is one sentence that says what to do."""


def run_cli(body: Callable[[], int | None]) -> int:
    """Runs a command; a UserError, or a file the user named that does not exist, becomes one
    line on stderr and exit status 2."""
    try:
        return body() or 0
    except (UserError, FileNotFoundError) as err:
        print(f"error: {str(err).strip()}", file=sys.stderr)
        return 2
