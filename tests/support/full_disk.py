"""A file whose writes fail as on a full disk, for the tests of what a command does then."""

import errno
import os


class FullDiskFile:
    """Wraps an open file: every `write` raises ENOSPC as `write(2)` does (naming no file);
    leaving the `with` block closes the real file."""

    def __init__(self, real):
        self.real = real

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()
