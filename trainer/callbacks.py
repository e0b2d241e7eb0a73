"""Callbacks that make a run resumable and observable, all keyed by the optimizer step.

`fit` runs in "intervals" (Keras epochs of a fixed number of steps); these callbacks act at
interval ends: weight checkpoints for export, the Keras backup for resumption, dropout RNG
state derived from the step, examples/s and a history.json that a plotting script reads.

Example:
    >>> callbacks = [DeterministicDropout(seed=42),
    ...              StepCheckpoints("out/checkpoints", masked_lm, every=1000, last_step=10_000),
    ...              PeriodicBackupAndRestore("out/backup", every=1000, last_step=10_000),
    ...              TrainingLog("out/history.json", global_batch_size=256)]
"""

from __future__ import annotations

import json
import time

import keras
import numpy as np
import tensorflow as tf


def _step(model) -> int:
    return int(model.optimizer.iterations.numpy())


def _due(step: int, every: int, last_step: int) -> bool:
    return step % every == 0 or step >= last_step


def checkpoint_path(directory: str, step: int) -> str:
    return f"{directory.rstrip('/')}/ckpt-{step:08d}.weights.h5"


def restored_step(backup_dir: str, steps_per_interval: int) -> int:
    """The step a restarted run resumes at, read from BackupAndRestore's own metadata
    (needed before `fit`, which restores the weights, to start the data stream there)."""
    path = f"{backup_dir.rstrip('/')}/training_metadata.json"
    if not tf.io.gfile.exists(path):
        return 0
    with tf.io.gfile.GFile(path) as f:
        return int(json.load(f)["epoch"]) * steps_per_interval


class PeriodicBackupAndRestore(keras.callbacks.BackupAndRestore):
    """Keras' BackupAndRestore, saving at interval ends that are due (every `every` steps and
    the last step); it only resumes correctly at interval ends, so never saves mid-interval."""

    def __init__(self, backup_dir: str, every: int, last_step: int):
        super().__init__(backup_dir, save_freq="epoch", delete_checkpoint=False)
        self.every, self.last_step = every, last_step

    def on_epoch_end(self, epoch, logs=None):
        self._current_epoch = epoch + 1
        self._last_batch_seen = 0
        if _due(_step(self.model), self.every, self.last_step):
            self._save_model()


class StepCheckpoints(keras.callbacks.Callback):
    """`ckpt-{step:08d}.weights.h5` of the keras-hub MaskedLM (the export contract), keeping
    the newest `keep`. Hand-written because ModelCheckpoint saves the outer model."""

    def __init__(self, directory: str, masked_lm, every: int, last_step: int, keep: int = 3):
        super().__init__()
        self.directory, self.masked_lm = directory.rstrip("/"), masked_lm
        self.every, self.last_step, self.keep = every, last_step, keep

    def on_epoch_end(self, epoch, logs=None):
        step = _step(self.model)
        if _due(step, self.every, self.last_step):
            tf.io.gfile.makedirs(self.directory)
            self.masked_lm.save_weights(checkpoint_path(self.directory, step))
            self._prune()

    def _prune(self):
        found = sorted(tf.io.gfile.glob(f"{self.directory}/ckpt-*.weights.h5"))
        for path in found[: max(0, len(found) - self.keep)]:
            tf.io.gfile.remove(path)


class DeterministicDropout(keras.callbacks.Callback):
    """Sets every dropout RNG state from (seed, step) at each interval start.

    Keras does not save SeedGenerator states with the weights, so without this a resumed run
    would draw other dropout masks than the uninterrupted one.
    """

    def __init__(self, seed: int):
        super().__init__()
        self.seed = seed

    def on_epoch_begin(self, epoch, logs=None):
        step = _step(self.model)
        generators = [g for layer in self.model._flatten_layers()
                      for g in getattr(layer, "_seed_generators", [])]
        for index, generator in enumerate(generators):
            state = generator.state
            value = np.array([(self.seed * 7919 + index) % 2**31, step % 2**31])
            state.assign(value.astype(state.dtype))


class TrainingLog(keras.callbacks.Callback):
    """Adds `examples_per_second` and the step to each interval's logs (so TensorBoard,
    placed after it, records them) and rewrites `history.json` (CSVLogger fails on gs://).

    Examples/s counts training time only: the interval's validation time is excluded.
    """

    def __init__(self, path: str, global_batch_size: int, history: list | None = None):
        super().__init__()
        self.path, self.global_batch_size = path, global_batch_size
        self.history = list(history or [])
        self.rates = []  # examples/s of this process's intervals

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
        entry = {"step": step, "examples_per_second": rate,
                 "learning_rate": float(keras.ops.convert_to_numpy(
                     self.model.optimizer.learning_rate))}
        for name, value in logs.items():
            key = "eval_" + name[4:] if name.startswith("val_") else name
            entry.setdefault(key, float(value))
        self.history.append(entry)
        with tf.io.gfile.GFile(self.path, "w") as f:
            f.write(json.dumps(self.history, indent=1) + "\n")


def read_history(path: str, up_to_step: int) -> list:
    """A previous attempt's history, cut at the step this attempt resumes from."""
    if not tf.io.gfile.exists(path):
        return []
    with tf.io.gfile.GFile(path) as f:
        return [e for e in json.load(f) if e["step"] <= up_to_step]
