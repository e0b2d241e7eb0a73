"""`python -m tests.trainer.killable_run KILL_AT TRAINER_FLAGS...`: runs the trainer CLI and
SIGKILLs its own process at a named point, the way a preemption or an OOM kill would.

KILL_AT is `none` or `POINT:N` (the N-th time POINT is reached in this process):

- `mid_interval:STEP`   after the train step that reaches STEP (no file being written);
- `mid_accumulation:STEP` after the first micro-batch that follows update STEP (with
                        --grad_accum_steps: gradients of the next update half accumulated);
- `history:N`           right after the N-th history.json write (before the checkpoint);
- `checkpoint_write:N`  half-way through writing the N-th checkpoint's bytes;
- `after_checkpoint:N`  right after the N-th checkpoint is published (before the backup);
- `backup_write:N`      half-way through writing the N-th backup's bytes;
- `metrics:N`           just before metrics.json is written (after the last backup);
- `checkpoint_term:N`   SIGTERM (not SIGKILL) once the N-th checkpoint's weights are saved to
                        a temporary file, before they are uploaded;
- `sigterm_at:STEP`     SIGTERM after the train step that reaches STEP (a preemption notice),
                        then a pause of 3 s inside the step, so that a JAX pod's preemption
                        notifier (it polls once a second) sees it while the run still trains.

The run goes through `run_cli`, as the trainer's CLI does (a SIGTERM exits with status 143).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from trainer.startup import launch

launch.prepare([])  # what a command does first (the backend from KERAS_BACKEND)

import keras  # noqa: E402

from common import fs  # noqa: E402
from common.errors import run_cli  # noqa: E402
from trainer.models import checkpoints  # noqa: E402
from trainer.models.checkpoints import update_count  # noqa: E402
from trainer.pretraining import task  # noqa: E402

_count: dict = {}


def _kill(sig=signal.SIGKILL):
    sys.stderr.flush()
    os.kill(os.getpid(), sig)


def _reached(point: str, kill_point: str, nth: int) -> bool:
    if point != kill_point:
        return False
    _count[point] = _count.get(point, 0) + 1
    return _count[point] == nth


class _SigtermAtStep(keras.callbacks.Callback):
    def __init__(self, step: int):
        super().__init__()
        self.step, self.sent = step, False

    def on_train_batch_end(self, batch, logs=None):
        if not self.sent and update_count(self.model.optimizer) >= self.step:
            self.sent = True
            _kill(signal.SIGTERM)
            time.sleep(3)


def _half_then_die(chunks):
    """The first chunk's first half, then the kill."""
    for chunk in chunks:
        yield chunk[: len(chunk) // 2]
        _kill()


# The uploads a torn write kills: (a part of the path, the kill point), the first match wins.
_TORN_WRITES = (("/checkpoints/", "checkpoint_write"), ("/backup/", "backup_write"))


def _torn_upload(upload, kill_point: str, nth: int):
    def torn_upload(path, chunks):
        kind = next((point for part, point in _TORN_WRITES if part in path), "")
        if kind and _reached(kind, kill_point, nth):
            return upload(path, _half_then_die(chunks))
        if "/checkpoints/" in path and _reached("checkpoint_term", kill_point, nth):
            _kill(signal.SIGTERM)
        return upload(path, chunks)

    return torn_upload


def _watched_json(write_json, kill_point: str, nth: int):
    def watched_json(path, obj):
        if path.endswith("/metrics.json") and _reached("metrics", kill_point, nth):
            _kill()
        write_json(path, obj)
        if path.endswith("/history.json") and _reached("history", kill_point, nth):
            _kill()

    return watched_json


def _watched_publish(publish, kill_point: str, nth: int):
    def watched_publish(model, path, upload=True):
        publish(model, path, upload)
        if "/checkpoints/" in path and _reached("after_checkpoint", kill_point, nth):
            _kill()

    return watched_publish


class _KillAtStep(keras.callbacks.Callback):
    """SIGKILL at the `batches_past`-th train batch that ends at or past update `step`."""

    def __init__(self, step: int, batches_past: int):
        super().__init__()
        self.step, self.batches_past = step, batches_past

    def on_train_batch_end(self, batch, logs=None):
        if update_count(self.model.optimizer) >= self.step:
            _count["past"] = _count.get("past", 0) + 1
            if _count["past"] == self.batches_past:
                _kill()


# The train-step kill points: which batch past update STEP dies. Under accumulation the batch
# that completes update STEP is the first to see it.
_BATCHES_PAST = {"mid_interval": 1, "mid_accumulation": 2}


def arm(kill_point: str, nth: int) -> list:
    """Wraps the file writers; returns extra callbacks for the train-step kill point."""
    fs.upload_stream = _torn_upload(fs.upload_stream, kill_point, nth)
    fs.write_json = _watched_json(fs.write_json, kill_point, nth)
    checkpoints.publish = _watched_publish(checkpoints.publish, kill_point, nth)
    if kill_point == "sigterm_at":
        return [_SigtermAtStep(nth)]
    if kill_point in _BATCHES_PAST:
        return [_KillAtStep(nth, _BATCHES_PAST[kill_point])]
    return []


def main(argv: list[str]) -> int:
    kill_at, flags = argv[0], argv[1:]
    extra = [] if kill_at == "none" else arm(kill_at.split(":")[0], int(kill_at.split(":")[1]))
    config = task.parse_args(flags)

    def body():
        metrics = task.run(config, extra_callbacks=extra)
        print({"steps": metrics["steps"]})

    return run_cli(body, flags)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
