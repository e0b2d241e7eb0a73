"""The flags of an output folder's lock (trainer/run_folder/folder_lock.py), one definition for
every command that trains into a folder: pretraining (`trainer.pretraining.config.TrainConfig`,
its `lock` part) and fine-tuning (`trainer.finetuning.finetune.FinetuneFlags`, which inherits
`LockFlags`) share it.

Example:
    >>> LockFlags(takeover_lock=True).lock_timeout_hours
    0.25
"""

from __future__ import annotations

import dataclasses

from common.flags import flag


@dataclasses.dataclass(frozen=True)
class LockFlags:
    takeover_lock: bool = flag(
        "Take --output_dir over from a run that holds its lock (only when that run is dead).",
        False,
    )
    lock_timeout_hours: float = flag(
        "An output folder's lock whose heartbeat (refreshed every minute while its run lives) "
        "is older than this is taken over without --takeover_lock (a run restarted on another "
        "machine after a preemption waits this long at most).",
        0.25,
        minimum=0.01,
    )
