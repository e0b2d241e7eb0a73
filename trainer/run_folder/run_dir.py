"""The files of one training run: the only module that spells their names.

    {output_dir}/run_config.json             settings; what a restart must not change;
                                             `attempts`: each attempt's recipe (attempts.py)
    {output_dir}/tokenizer/                  a copy of the tokenizer files
    {output_dir}/checkpoints/ckpt-{step:08d}.weights.h5   MaskedLM weights (export contract)
    {output_dir}/backup/state-{step:08d}.weights.h5       weights + optimizer state (resume)
    {output_dir}/logs/{train,validation}/    TensorBoard summaries, x-axis = optimizer step
    {output_dir}/history.json                one entry per interval (the plot reads it)
    {output_dir}/metrics.json                final metrics, written when the run completes
    {output_dir}/export/{keras-hub,hf}/      the export pushed at the end of a run (--push_to)
    {output_dir}/_LOCK                       held by the chief while a run lives
                                             (trainer/run_folder/folder_lock.py, common/run_lock.py)

Every file is written whole or not at all (see `trainer.models.checkpoints.publish` and
`common.fs.write_bytes`), and the step in a weight file's name is the optimizer step stored
inside it, so a reader never needs a second file to interpret one.

Example:
    >>> run = RunDir("gs://b/runs/r1")
    >>> run.checkpoint(1200)
    'gs://b/runs/r1/checkpoints/ckpt-00001200.weights.h5'
    >>> step_of("ckpt-00001200.weights.h5")
    1200
"""

from __future__ import annotations

import re

from common import fs

RUN_CONFIG = "run_config.json"
TOKENIZER_DIR = "tokenizer"
CHECKPOINTS_DIR = "checkpoints"
BACKUP_DIR = "backup"
LOGS_DIR = "logs"
HISTORY = "history.json"
METRICS = "metrics.json"
EXPORT_DIR = "export"
WEIGHTS_SUFFIX = ".weights.h5"
_STEP_RE = re.compile(r"^(?:ckpt|state)-(\d+)\.weights\.h5$")


def step_of(path: str) -> int | None:
    """`.../ckpt-00001200.weights.h5` (or `state-...`) -> 1200; None for other names."""
    match = _STEP_RE.match(fs.basename(path))
    return int(match.group(1)) if match else None


def newest_first(paths) -> list[str]:
    """Weight files ordered by the step in their names, newest first (others dropped)."""
    stepped = [(step_of(p), p) for p in paths]
    return [p for s, p in sorted((sp for sp in stepped if sp[0] is not None), reverse=True)]


class RunDir:
    """Paths inside one run's output folder (local or gs://).

    Args:
        root: the run's `--output_dir`.
    """

    def __init__(self, root: str):
        self.root = root.rstrip("/")

    def _path(self, *parts: str) -> str:
        return fs.join(self.root, *parts)

    @property
    def run_config(self) -> str:
        return self._path(RUN_CONFIG)

    @property
    def tokenizer_dir(self) -> str:
        return self._path(TOKENIZER_DIR)

    @property
    def checkpoints_dir(self) -> str:
        return self._path(CHECKPOINTS_DIR)

    @property
    def backup_dir(self) -> str:
        return self._path(BACKUP_DIR)

    @property
    def history(self) -> str:
        return self._path(HISTORY)

    @property
    def metrics(self) -> str:
        return self._path(METRICS)

    @property
    def export_dir(self) -> str:
        return self._path(EXPORT_DIR)

    def logs(self, kind: str) -> str:
        """TensorBoard folder of `train` or `validation` summaries."""
        return self._path(LOGS_DIR, kind)

    def checkpoint(self, step: int) -> str:
        return self._path(CHECKPOINTS_DIR, f"ckpt-{step:08d}{WEIGHTS_SUFFIX}")

    def backup(self, step: int) -> str:
        return self._path(BACKUP_DIR, f"state-{step:08d}{WEIGHTS_SUFFIX}")

    def checkpoints(self) -> list[str]:
        """Checkpoint files, newest step first."""
        return newest_first(fs.glob_in(self._path(CHECKPOINTS_DIR), "ckpt-*" + WEIGHTS_SUFFIX))

    def backups(self) -> list[str]:
        """Backup files, newest step first."""
        return newest_first(fs.glob_in(self._path(BACKUP_DIR), "state-*" + WEIGHTS_SUFFIX))
