"""A folder written whole or not at all (`whole_folder`): staged beside its destination,
then swapped in (locally one atomic exchange; on object stores markers deleted first and
copied last), so a reader never loads a mix of two outputs.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os

from common import fs
from common.errors import UserError
from common.staging import STAGED, TEMP_PREFIX


class NotReplaceableError(UserError):
    """The destination holds something that is not an earlier output of the same kind."""


@contextlib.contextmanager
def whole_folder(dest: str, markers: tuple[str, ...]):
    """Yields a staging folder beside `dest`; once the block ends without error, what it
    holds replaces `dest` whole (an earlier folder there is dropped, not merged). An error
    or a stop (Ctrl-C, SIGTERM) in the block deletes the staging folder and leaves `dest`
    exactly as it was.

    `markers` are the paths inside a folder (`config.json`, `hf/config.json`) whose presence
    makes it complete to its readers (keras-hub and transformers load nothing without
    `config.json`). A non-empty `dest` that holds none of them is not an earlier output and
    is refused before anything is written, and so is the current folder or one holding it:
    replacing it would delete someone's files (a run folder holding an export deeper down
    is not an export). Two writes into the same folder at once are not supported: each
    deletes the stages of earlier, killed writes.

    Local: the swap is one atomic exchange of the two folders (Linux `renameat2`), else two
    renames (a kill between them, microseconds, leaves the old folder under `.tmp-*`).
    Object stores have no rename: the staged files are copied in (server side) with every
    marker deleted first and copied last, so `dest` is never a loadable mix; the previous
    output survives every failure before that swap (the writing, where the disk or the
    network fails), but a kill during the swap leaves `dest` without its markers."""
    dest = dest.rstrip("/")
    _check_replaceable(dest, markers)
    parent, name = (
        (dest.rsplit("/", 1) + [""])[:2]
        if fs.is_remote(dest)
        else os.path.split(os.path.abspath(dest))
    )
    _delete_stale_stages(parent, name)
    stage = fs.join(parent, fs.temp_name(name))
    if not fs.is_remote(stage):
        os.makedirs(stage)
    try:
        yield stage
        _swap_in(stage, dest, markers)
    finally:
        fs.delete_tree(stage)


def _check_replaceable(dest: str, markers) -> None:
    files = fs.files_under(dest) if fs.is_remote(dest) or os.path.isdir(dest) else []
    if not fs.is_remote(dest) and os.path.exists(dest) and not os.path.isdir(dest):
        raise NotReplaceableError(f"{dest} is a file, not a folder to write into.")
    here, there = (os.path.realpath(p) + os.sep for p in (os.getcwd(), dest))
    if not fs.is_remote(dest) and here.startswith(there):
        raise NotReplaceableError(
            f"{dest} holds the current folder; it would be replaced whole: choose another folder."
        )
    if files and not any(f[len(dest) + 1 :] in markers for f in files):
        raise NotReplaceableError(
            f"{dest} holds files that are not an earlier output of this command (e.g. "
            f"{min(files)}); it would be replaced whole: choose another folder or empty it."
        )


def _delete_stale_stages(parent: str, name: str) -> None:
    """What a killed earlier write to the same folder left (SIGKILL runs no clean-up)."""
    if fs.is_remote(parent):
        stale = {
            p[len(parent) + 1 :].split("/", 1)[0]
            for p in fs.glob_in(parent, TEMP_PREFIX + "*-" + fs.escape_glob(name) + "/**")
        }
    else:
        stale = set(os.listdir(parent)) if os.path.isdir(parent) else set()
    for entry in stale:
        if STAGED.match(entry) and entry[STAGED.match(entry).end() :] == name:
            fs.delete_tree(fs.join(parent, entry))


def _swap_in(stage: str, dest: str, markers) -> None:
    if not fs.is_remote(dest):
        if not os.path.exists(dest):
            os.rename(stage, dest)
        elif not _exchange(stage, dest):
            aside = os.path.join(os.path.dirname(stage), fs.temp_name(fs.basename(dest)))
            os.rename(dest, aside)
            os.rename(stage, dest)
            os.rename(aside, stage)  # the old folder, deleted with the stage
        return
    new = {f[len(stage) + 1 :] for f in fs.files_under(stage)}
    old = fs.files_under(dest)
    fs.delete([f for f in old if f[len(dest) + 1 :] in markers])
    for last in (False, True):  # the markers after everything they vouch for
        names = sorted(n for n in new if (n in markers) == last)
        if names:
            fs.copy(
                [fs.join(stage, n) for n in names],  # names taken literally
                [fs.join(dest, n) for n in names],
            )
    fs.delete([f for f in old if f[len(dest) + 1 :] not in new])


def _exchange(a: str, b: str) -> bool:
    """Swaps two local paths atomically (Linux renameat2 RENAME_EXCHANGE); False where the
    system or filesystem cannot, so that the caller falls back to two renames."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), b)
