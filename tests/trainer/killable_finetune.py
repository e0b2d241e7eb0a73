"""`python -m tests.trainer.killable_finetune none|sigterm_at:N[:PAUSE] FINETUNE_FLAGS...`: runs
`python -m trainer.finetune` and sends its own process SIGTERM (a preemption notice) at the
N-th train batch of the command (counted over every seed), then pauses PAUSE seconds inside
that batch (default 0; a JAX pod's preemption notifier polls once a second, so a pod needs
~3 s for the notice to reach the others while they still train).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from trainer.startup import launch

launch.prepare([])  # what a command does first (the backend from KERAS_BACKEND)

from trainer.finetuning import finetune, interruption  # noqa: E402


def arm(kill_at: str) -> None:
    point, *rest = kill_at.split(":")
    if point == "none":
        return
    if point != "sigterm_at":
        raise SystemExit(f"unknown kill point {kill_at!r}")
    at, pause = int(rest[0]), float(rest[1]) if len(rest) > 1 else 0.0
    original = interruption.Watch.on_train_batch_end

    def on_train_batch_end(self, batch, logs=None):
        if self.calls + 1 == at:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(pause)
        original(self, batch, logs)

    interruption.Watch.on_train_batch_end = on_train_batch_end


if __name__ == "__main__":
    arm(sys.argv[1])
    sys.exit(finetune.main(sys.argv[2:]))
