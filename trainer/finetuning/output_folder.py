"""What a fine-tuning run finds in its output folder from an earlier one, and removes.

The chief holds the folder's lock (trainer/run_folder/folder_lock.py) while it runs, so no other run
writes there meanwhile; before its first seed it deletes the earlier run's results.json (a
killed run must not leave an old file that a reader trusts as its own) and its TensorBoard
logs (`logs/seed-N`: new event files beside old ones would show two runs as one curve).
"""

from __future__ import annotations

from common import fs
from trainer.finetuning import results


def clear_earlier_run(output_dir: str, job_dirs: list[str]) -> None:
    """Deletes the results.json of `output_dir` and of each job folder, and each job
    folder's logs/."""
    results.remove_stale(output_dir)
    for folder in job_dirs:
        results.remove_stale(folder)
        fs.delete_tree(fs.join(folder, results.LOGS))
