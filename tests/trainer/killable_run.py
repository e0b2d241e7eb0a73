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


def arm(kill_point: str, nth: int) -> list:
    """Wraps the file writers; returns extra callbacks for the train-step kill point."""
    upload, write_json, publish = fs.upload_stream, fs.write_json, checkpoints.publish

    def torn_upload(path, chunks):
        kind = (
            "checkpoint_write"
            if "/checkpoints/" in path
            else "backup_write"
            if "/backup/" in path
            else ""
        )
        if kind and _reached(kind, kill_point, nth):

            def half_then_die():
                for chunk in chunks:
                    yield chunk[: len(chunk) // 2]
                    _kill()

            return upload(path, half_then_die())
        if "/checkpoints/" in path and _reached("checkpoint_term", kill_point, nth):
            _kill(signal.SIGTERM)
        return upload(path, chunks)

    def watched_json(path, obj):
        if path.endswith("/metrics.json") and _reached("metrics", kill_point, nth):
            _kill()
        write_json(path, obj)
        if path.endswith("/history.json") and _reached("history", kill_point, nth):
            _kill()

    def watched_publish(model, path, upload=True):
        publish(model, path, upload)
        if "/checkpoints/" in path and _reached("after_checkpoint", kill_point, nth):
            _kill()

    fs.upload_stream, fs.write_json, checkpoints.publish = (
        torn_upload,
        watched_json,
        watched_publish,
    )
    if kill_point == "sigterm_at":
        return [_SigtermAtStep(nth)]
    if kill_point not in ("mid_interval", "mid_accumulation"):
        return []
    # Under accumulation the batch that completes update STEP is the first to see it.
    batches_past = 1 if kill_point == "mid_interval" else 2

    class KillAtStep(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if update_count(self.model.optimizer) >= nth:
                _count["past"] = _count.get("past", 0) + 1
                if _count["past"] == batches_past:
                    _kill()

    return [KillAtStep()]


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
