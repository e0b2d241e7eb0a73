"""The loop of a task kind that does not fine-tune a classifier head with `model.fit`: the
module its `task_kinds` record names (`TaskKind.runner`), imported when that kind is asked for.

A runner module answers `build(config, size, settings) -> [jobs.Job]` (its data read and
checked before any model loads), `run_job(runtime, source, backbone, pretrained, job,
watch=None) -> results document` (written by the chief, as `job_run.run_job`'s) and
`table(document) -> str` (what `trainer.finetune` prints).

Example:
    >>> of("embedding").__name__, of("classification")
    ('trainer.finetuning.embedding_run', None)
"""

from __future__ import annotations

import importlib

from trainer.tasks import task_kinds


def of(task_type: str):
    """The runner module of `task_type`, or None for the classifier's own loop (`job_run`)."""
    runner = task_kinds.get(task_type).runner
    return importlib.import_module(runner) if runner else None
