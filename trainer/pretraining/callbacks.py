"""Callbacks that make a run resumable and observable, all keyed by the optimizer step.

`fit` runs in "intervals" (Keras epochs of a fixed number of steps); these callbacks act at
interval ends, in this order (the order is the protocol; docs/training.md, "Preemption"):

0. `StopOnNonFiniteLoss`: raises at the first non-finite training or evaluation loss, so
   nothing below runs for that interval (Keras calls callbacks in list order);
1. `TrainingLog`: history.json and TensorBoard summaries at the step;
2. `StepCheckpoints`: `checkpoints/ckpt-{step}.weights.h5` of the MaskedLM (for export);
3. `StateBackup`: `backup/state-{step}.weights.h5`, weights + optimizer state: the commit of
   the interval. A restart resumes from the newest readable one; everything the earlier
   callbacks wrote for later steps is then rewritten identically.

Only the chief process writes (`chief=False` turns every writer into a no-op, though every
process still serialises the weights: see `checkpoints.publish`).

Example:
    >>> run = RunDir("out")
    >>> callbacks = [StopOnNonFiniteLoss(), DeterministicDropout(seed=42),
    ...              TrainingLog(run, global_batch_size=256),
    ...              StepCheckpoints(run, masked_lm, every=1000, last_step=10_000),
    ...              StateBackup(run, every=1000, last_step=10_000)]
"""

from __future__ import annotations

import time

import keras
import numpy as np

from common import fs
from common.errors import Terminated, UserError
from trainer.models import checkpoints
from trainer.models.checkpoints import micro_batches_per_update, update_count
from trainer.run_folder.run_dir import RunDir
from trainer.training import summaries


def _step(model) -> int:
    return update_count(model.optimizer)


def _due(step: int, every: int, last_step: int) -> bool:
    return step % every == 0 or step >= last_step


class NonFiniteLossError(UserError):
    """Training diverged or read data that lies; nothing of the bad interval was written."""


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Raises `NonFiniteLossError` (one line, exit status 2) at the first batch end whose
    training loss, or interval end whose evaluation loss, is NaN or infinite.

    Must come first in the callback list: raising in `on_epoch_end` before the writers run
    keeps a NaN interval out of history.json, the checkpoints and the backups, and raising
    in `on_train_batch_end` ends `fit` before the interval's end. (Keras' TerminateOnNaN
    checks the batch loss only and stops gracefully, so the interval's writers would run.)
    The logged loss is the interval's running mean, so one NaN step makes it NaN."""

    def on_epoch_begin(self, epoch, logs=None):
        self._start = _step(self.model)

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not np.isfinite(float(loss)):
            micro = micro_batches_per_update(self.model.optimizer)
            self._stop("training loss", loss, self._start + -(-(batch + 1) // micro))

    def on_epoch_end(self, epoch, logs=None):
        for key in ("loss", "val_loss"):
            value = (logs or {}).get(key)
            if value is not None and not np.isfinite(float(value)):
                name = "evaluation loss" if key == "val_loss" else "training loss"
                self._stop(name, value, _step(self.model))

    def _stop(self, what: str, value, step: int):
        raise NonFiniteLossError(
            f"the {what} is {float(value)} at step {step}: training stopped, and nothing "
            f"after step {self._start} was saved. Check the data with python -m common.verify "
            "(ids beyond the vocabulary make the loss NaN), or lower --learning_rate."
        )


class StepCheckpoints(keras.callbacks.Callback):
    """`ckpt-{step:08d}.weights.h5` of the keras-hub MaskedLM (the export contract), keeping
    the newest `keep`. Hand-written because ModelCheckpoint saves the outer model."""

    def __init__(
        self, run: RunDir, masked_lm, every: int, last_step: int, keep: int = 3, chief: bool = True
    ):
        super().__init__()
        self.run, self.masked_lm, self.chief = run, masked_lm, chief
        self.every, self.last_step, self.keep = every, last_step, keep

    def on_epoch_end(self, epoch, logs=None):
        step = _step(self.model)
        if _due(step, self.every, self.last_step):
            checkpoints.publish(self.masked_lm, self.run.checkpoint(step), upload=self.chief)
            if self.chief:
                checkpoints.prune(self.run.checkpoints(), self.keep)


class StateBackup(keras.callbacks.Callback):
    """Weights + optimizer state (its `iterations` is the step) at due interval ends; keeps
    the newest two, so a backup that turns out unreadable still has a predecessor.

    Replaces Keras' BackupAndRestore, which overwrites one file in place and records an
    epoch count instead of the step (a resume then depends on today's interval length)."""

    def __init__(self, run: RunDir, every: int, last_step: int, keep: int = 2, chief: bool = True):
        super().__init__()
        self.run, self.every, self.last_step = run, every, last_step
        self.keep, self.chief = keep, chief

    def on_epoch_end(self, epoch, logs=None):
        step = _step(self.model)
        if _due(step, self.every, self.last_step):
            checkpoints.publish(self.model, self.run.backup(step), upload=self.chief)
            if self.chief:
                checkpoints.prune(self.run.backups(), self.keep)


class PreemptionSync(keras.callbacks.Callback):
    """SIGTERM on a JAX pod: every host stops at the same step with its backup written.

    There jax.distributed's preemption notifier owns SIGTERM (a preemption or maintenance
    notice on a TPU VM) and tells every host; `reached(n)`, called after each train call with
    the call's number (the same on every host), turns True on all hosts at one call. Then
    every process saves the backup of that step (a collective save; only the chief writes)
    and raises `Terminated`: exit status 143, and the same command resumes there. At an
    interval's last call the stop waits for `on_epoch_end`, after the history, checkpoint
    and backup of the step (this callback comes after them), so a resume misses none."""

    def __init__(self, reached, run: RunDir, every: int, last_step: int, chief: bool = True):
        super().__init__()
        self.reached, self.run, self.chief = reached, run, chief
        self.every, self.last_step = every, last_step
        self.calls, self.pending = 0, False

    def on_train_batch_end(self, batch, logs=None):
        self.calls += 1
        if not self.reached(self.calls):
            return
        if batch + 1 >= ((self.params or {}).get("steps") or 0):
            self.pending = True  # the interval ends here: stop after its files
        else:
            self._stop()

    def on_epoch_end(self, epoch, logs=None):
        if self.pending:
            self._stop()

    def _stop(self):
        step = _step(self.model)
        path = self.run.backup(step)
        # Decided alike on every host (the save is collective): StateBackup wrote due steps.
        if not (self.pending and _due(step, self.every, self.last_step)):
            checkpoints.publish(self.model, path, upload=self.chief)
            if self.chief:
                checkpoints.prune(self.run.backups(), 2)
        raise Terminated(
            f"stopped by signal SIGTERM (a preemption notice): every host "
            f"stopped at step {step}, backed up to {path}"
        )


def seed_generators(model) -> list:
    """Every `keras.random.SeedGenerator` of the model's layers, in a fixed order.

    Uses two private Keras attributes (`_flatten_layers`, `_seed_generators`); a test
    (tests/trainer/pretraining/test_callbacks.py) fails loudly if a Keras upgrade renames them."""
    return [g for layer in model._flatten_layers() for g in getattr(layer, "_seed_generators", [])]


class DeterministicDropout(keras.callbacks.Callback):
    """Sets every dropout RNG state from (seed, step) at each interval start.

    Keras does not save SeedGenerator states with the weights, so without this a resumed run
    would draw other dropout masks than the uninterrupted one. Each generator advances its
    counter by one per training step (micro-batch, under gradient accumulation), so the
    state at a step does not depend on where the intervals start: changing --eval_every
    between restarts keeps the masks.
    """

    def __init__(self, seed: int):
        super().__init__()
        self.seed = seed

    def on_epoch_begin(self, epoch, logs=None):
        # Generators advance once per micro-batch: count those, so no two steps share masks.
        step = _step(self.model) * micro_batches_per_update(self.model.optimizer)
        for index, generator in enumerate(seed_generators(self.model)):
            state = generator.state
            value = np.array([(self.seed * 7919 + index) % 2**31, step % 2**31])
            state.assign(value.astype(state.dtype))


class TrainingLog(keras.callbacks.Callback):
    """Adds `examples_per_second` and the step to each interval's logs, rewrites
    `history.json` (CSVLogger fails on gs://) and writes TensorBoard summaries whose x-axis
    is the optimizer step (Keras' TensorBoard callback counts epochs, which restart).

    Examples/s counts training time only: the interval's validation time is excluded.
    `phase_of(step)`, given for a run with --phases, adds the phase that trained the interval
    ending at `step` (history.json's `phase`, a TensorBoard scalar).
    """

    def __init__(
        self,
        run: RunDir,
        global_batch_size: int,
        history: list | None = None,
        chief: bool = True,
        phase_of=None,
    ):
        super().__init__()
        self.run, self.global_batch_size, self.chief = run, global_batch_size, chief
        self.phase_of = phase_of
        self.history = list(history or [])
        self.rates = []  # examples/s of this process's intervals
        self._writers = {}

    def on_epoch_begin(self, epoch, logs=None):
        self._start, self._train_end = time.perf_counter(), None
        self._start_step = _step(self.model)

    def on_test_begin(self, logs=None):
        if getattr(self, "_start", None) is not None and self._train_end is None:
            self._train_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        step = _step(self.model)
        elapsed = (self._train_end or time.perf_counter()) - self._start
        rate = (step - self._start_step) * self.global_batch_size / max(elapsed, 1e-9)
        self.rates.append(rate)
        logs["examples_per_second"] = rate
        entry = {
            "step": step,
            "examples_per_second": rate,
            "learning_rate": float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)),
        }
        if self.phase_of is not None:
            entry["phase"] = self.phase_of(step)
        for name, value in logs.items():
            key = "eval_" + name[4:] if name.startswith("val_") else name
            entry.setdefault(key, float(value))
        self.history.append(entry)
        if self.chief:
            fs.write_json(self.run.history, self.history)
            self._summaries(entry)

    def _summaries(self, entry: dict) -> None:
        for kind in ("train", "validation"):
            if kind not in self._writers:
                self._writers[kind] = summaries.EventLog(self.run.logs(kind))
            self._writers[kind].write(
                entry["step"],
                {
                    key.removeprefix("eval_"): value
                    for key, value in entry.items()
                    if key != "step" and key.startswith("eval_") == (kind == "validation")
                },
            )


def read_history(path: str, up_to_step: int) -> list:
    """A previous attempt's history, cut at the step this attempt resumes from."""
    if not fs.exists(path):
        return []
    return [e for e in fs.read_json(path) if e["step"] <= up_to_step]
