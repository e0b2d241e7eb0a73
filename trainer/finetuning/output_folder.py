"""What a fine-tuning run finds in its output folder from an earlier one, and removes.

The chief holds the folder's lock (trainer/run_folder/folder_lock.py) while it runs, so no other run
writes there meanwhile; before its first seed it deletes the earlier run's results.json (a
killed run must not leave an old file that a reader trusts as its own) and its TensorBoard
logs (`logs/seed-N`: new event files beside old ones would show two runs as one curve).

Only what a fine-tune writes is ever deleted: a `logs/` folder that holds anything else (a
pretraining run's `logs/train/`, a user's notes) is refused in one line before anything is
touched, as the export refuses a folder that is not an earlier export.
"""

from __future__ import annotations

import os
import re

from common import fs
from common.errors import UserError
from trainer.finetuning import results

# The only entries a fine-tune writes under a job folder's logs/ (results.Scalars).
_SEED_LOGS = re.compile(r"seed-\d+$")


class OutputFolderError(UserError):
    """The output folder holds files a fine-tune did not write and would have to delete."""


def check(job_dirs: list[str]) -> None:
    """Refuses, in one line, a job folder whose logs/ holds anything but `seed-N/` folders:
    clearing the earlier run's logs would delete it. `finetune` calls it before any work;
    `clear_earlier_run` again, under the folder's lock, before it deletes."""
    for folder in dict.fromkeys(job_dirs):
        logs = fs.join(folder, results.LOGS)
        if not fs.is_remote(logs) and os.path.isfile(logs):
            raise OutputFolderError(
                f"{logs} is a file, not a fine-tune's logs folder: choose another --output_dir."
            )
        for path, entry in _entries(logs):
            if not _SEED_LOGS.fullmatch(entry):
                raise OutputFolderError(
                    f"{folder} holds {path}, which no fine-tune wrote: its logs/ would be "
                    "cleared for this run; choose another --output_dir."
                )


def clear_earlier_run(output_dir: str, job_dirs: list[str]) -> None:
    """Deletes the results.json of `output_dir` and of each job folder, and each job
    folder's `logs/seed-N` folders, once `check` finds nothing else there."""
    check(job_dirs)
    results.remove_stale(output_dir)
    for folder in dict.fromkeys(job_dirs):
        results.remove_stale(folder)
        logs = fs.join(folder, results.LOGS)
        for entry in sorted({entry for _, entry in _entries(logs)}):
            fs.delete_tree(fs.join(logs, entry))


def _entries(logs: str) -> list[tuple[str, str]]:
    """(file, the folder directly under `logs` that holds it) for every file under `logs`; a
    file right in `logs` is its own entry with a trailing "/" (a name no folder matches)."""
    if not (fs.is_remote(logs) or os.path.isdir(logs)):
        return []
    found = []
    for path in sorted(fs.files_under(logs)):
        first, *rest = path[len(logs) + 1 :].replace(os.sep, "/").split("/", 1)
        found.append((path, first if rest else first + "/"))
    return found
