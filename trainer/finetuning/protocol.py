"""The protocol: per seed, fine-tune for `epochs`, score dev after each epoch, keep the best
epoch by the task's metric (ties: the earlier epoch), score test with that epoch's weights;
then summarise the seeds and flag those that collapsed.

Collapse: a seed whose best epoch gives every dev example the same answer, or whose best dev
score is no better than a constant answer's (the best single class on dev, or the training
mean for regression), learnt nothing from the text. Such a seed
is marked in the table and results.json; the summary gives the mean over all seeds (what
peers average) and, beside it, the mean without the collapsed ones.

Example:
    >>> models = SeedModels(backbone, data, recipe, jit_compile=False)
    >>> result = run_seed(models, seed=1)
    >>> result["best_epoch"], result["dev"]["accuracy"]
    (3, 0.84)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time

import numpy as np

from trainer import backends
from trainer.finetuning import classifier, divergence, recipes
from trainer.tasks import metrics, task_kinds

COLLAPSE_MARGIN = 1e-6  # "no better than constant": within float noise of it


@dataclasses.dataclass
class TaskData:
    """Packed inputs (numpy dicts) and targets of each split."""

    task_type: str
    num_outputs: int
    train: tuple  # (features, targets)
    dev: tuple
    test: tuple | None = None


def padded(features: dict, count: int, replicas: int) -> tuple[dict, int]:
    """(`features` with rows added so that every batch splits evenly over the replicas, the
    number added). The global batch is a multiple of the replicas (checked before), so only
    the last, partial batch needs them: JAX's DataParallel cannot shard a batch that does not
    divide by its devices. The added rows repeat the first one; callers give them no weight
    (training) or drop their outputs (prediction)."""
    extra = -count % replicas
    if not extra:
        return features, 0
    return {
        name: np.concatenate([a, np.repeat(a[:1], extra, 0)]) for name, a in features.items()
    }, extra


@dataclasses.dataclass(frozen=True)
class Devices:
    """What the protocol needs of the run's devices (`trainer.backends.Runtime`): `replicas`
    share every global batch; `processes` (a JAX pod's hosts) each give Keras their own share
    of it, this one being `process`."""

    replicas: int = 1
    process: int = 0
    processes: int = 1

    def share(self, count: int, batch_size: int) -> np.ndarray | None:
        """Row indices of this process's share of every global batch of `batch_size` rows in
        `count` rows (None: one process, all of them): its slice of each batch, in order.
        Keras' DataParallel assembles the processes' batches in process order
        (`jax.make_array_from_process_local_data`), so the global batches are the ones one
        process would give. `count` (padded) and `batch_size` are multiples of the replicas,
        and each process holds as many of them, so every batch splits evenly."""
        if self.processes == 1:
            return None
        rows = []
        for start in range(0, count, batch_size):
            part = min(batch_size, count - start) // self.processes
            rows.append(np.arange(start + self.process * part, start + (self.process + 1) * part))
        return np.concatenate(rows)


def _rows(arrays, rows: np.ndarray | None):
    """`arrays` (a dict of arrays, an array or None) at `rows` (None: all)."""
    if rows is None or arrays is None:
        return arrays
    if isinstance(arrays, dict):
        return {name: array[rows] for name, array in arrays.items()}
    return arrays[rows]


def predictions(
    model, features: dict, task_type: str, batch_size: int, devices: Devices = Devices()
) -> np.ndarray:
    """Every example's prediction, on every process: each gives its share of each batch and
    gets the whole batch's outputs back (`backends.replicate_predictions`)."""
    count = len(next(iter(features.values())))
    features, extra = padded(features, count, devices.replicas)
    mine = _rows(features, devices.share(count + extra, batch_size))
    local_batch = batch_size // devices.processes
    outputs = np.asarray(model.predict(mine, batch_size=local_batch, verbose=0))[:count]
    return task_kinds.get(task_type).predictions(outputs)


def training_arrays(
    train: tuple, seed: int, epoch: int, batch_size: int, devices: Devices = Devices()
) -> dict:
    """`fit`'s x, y, sample_weight and batch_size for one epoch on this process: this seed's
    and epoch's order, padded for the replicas with rows of weight 0 (None: nothing padded),
    this process's share of each global batch. The loss divides by the sum of the weights
    (`classifier.compile_for`), so a padded batch trains as the unpadded one."""
    features, targets = shuffled(train, seed, epoch)
    features, extra = padded(features, len(targets), devices.replicas)
    weights = None
    if extra:
        weights = np.concatenate([np.ones(len(targets), np.float32), np.zeros(extra, np.float32)])
        targets = np.concatenate([targets, np.repeat(targets[:1], extra, 0)])
    rows = devices.share(len(targets), batch_size)
    return {
        "x": _rows(features, rows),
        "y": _rows(targets, rows),
        "sample_weight": _rows(weights, rows),
        "batch_size": batch_size // devices.processes,
    }


def scores(task_type: str, num_outputs: int, targets, predicted) -> dict:
    return task_kinds.get(task_type).scores(targets, predicted, num_outputs)


def constant_scores(data: TaskData) -> dict:
    """Per metric, the best dev score that any constant answer gets (each class in turn; the
    training mean for regression): the level of a model that learnt nothing from the text.
    The best, not the training majority's: dev's majority class may be another one."""
    dev_targets = data.dev[1]
    found = {}
    for answer in task_kinds.get(data.task_type).constant_answers(data.train[1], data.num_outputs):
        constant = np.full(len(dev_targets), answer)
        for name, value in scores(data.task_type, data.num_outputs, dev_targets, constant).items():
            if name not in found or better(value, found[name], name):
                found[name] = value
    return found


def better(new: float | None, old: float | None, metric: str) -> bool:
    if new is None:  # no number (non-finite predictions) is never the best epoch
        return False
    if old is None:
        return True
    return new > old if metrics.HIGHER_IS_BETTER[metric] else new < old


def is_collapsed(best: float, constant: float, metric: str) -> bool:
    if metrics.HIGHER_IS_BETTER[metric]:
        return best <= constant + COLLAPSE_MARGIN
    return best >= constant - COLLAPSE_MARGIN


class SeedModels:
    """One compiled classifier for every seed: each seed copies in a freshly seeded model's
    variables (weights and dropout seed states) and zeroes the optimizer's, so no seed pays
    for tracing and compiling the step again (tens of seconds on a CPU) and each starts as if
    alone."""

    def __init__(
        self, backbone, data: TaskData, recipe: recipes.Recipe, jit_compile: bool, runtime=None
    ):
        """`runtime`: the run's devices (`trainer.backends.Runtime`; None: one device, float32).
        The model is built in its scope (TensorFlow: the strategy's; JAX: the DataParallel set
        globally) with its precision and attention (`trainer.backends.devices.DeviceSettings`), each
        global batch of `recipe.batch_size` is split over its replicas, and on a JAX pod each
        process gives its share of every batch."""
        if isinstance(recipe.learning_rate, recipes.Auto):  # the optimizer needs a number
            raise TypeError("--learning_rate auto: choose the rate first (auto_rate.choose)")
        self.backbone, self.data, self.recipe = backbone, data, recipe
        self.jit_compile = jit_compile
        self.scope = runtime.scope if runtime else contextlib.nullcontext
        self.precision = runtime.device.precision if runtime else "fp32"
        self.fused_attention = bool(runtime and runtime.device.fused_attention)
        self.devices = Devices()
        if runtime:
            # A TensorFlow pod is one client process that feeds every host (tf.distribute).
            processes = runtime.num_pipelines if runtime.backend == "jax" else 1
            process = runtime.pipeline_id if processes > 1 else 0
            self.devices = Devices(runtime.replicas, process, processes)
        self.model = None

    def start(self, seed: int):
        with self.scope():
            return self._start(seed)

    def _start(self, seed: int):
        fresh = self.backbone.classifier(
            self.data.num_outputs, seed, self.precision, self.fused_attention
        )
        if self.model is None:
            total = math.ceil(len(self.data.train[1]) / self.recipe.batch_size) * self.recipe.epochs
            classifier.compile_for(
                fresh,
                self.data.task_type,
                self.recipe.learning_rate,
                total,
                round(total * self.recipe.warmup_ratio),
                self.recipe.weight_decay,
                self.jit_compile,
            )
            if self.devices.processes > 1:
                backends.replicate_predictions(fresh)
            self.model = fresh
            return fresh
        for target, value in zip(self.model.variables, fresh.variables, strict=True):
            target.assign(value)
        for variable in self.model.optimizer.variables:
            variable.assign(np.zeros(variable.shape, variable.dtype))
        return self.model


def shuffled(train: tuple, seed: int, epoch: int) -> tuple:
    """The training arrays in this seed's and epoch's order (Keras ignores `shuffle` for
    some inputs; an order of our own is the same on both backends)."""
    features, targets = train
    order = np.random.default_rng([seed, epoch]).permutation(len(targets))
    return {name: array[order] for name, array in features.items()}, targets[order]


def fit_epoch(model, arrays: dict, seed: int, epoch: int, watch=None) -> tuple:
    """One epoch of `model.fit` on `arrays` (fit's x, y, sample_weight, batch_size, in this
    seed's order): (its loss, None), or (None, why) where the loss turned non-finite. `watch`
    (`interruption.Watch`) stops the fit at a batch end after a SIGTERM, then raises
    `Interrupted`. Every kind fitted with `model.fit` runs its epochs through here."""
    guard = divergence.NonFiniteLoss(epoch)
    history = model.fit(
        **arrays,
        epochs=1,
        shuffle=False,
        verbose=0,
        callbacks=[guard] if watch is None else [guard, watch],
    )
    if watch is not None:
        watch.check(seed, epoch)  # raises Interrupted where the watch stopped the fit
    if guard.found:
        return None, guard.found
    return float(history.history["loss"][-1]), None


def run_seed(models: SeedModels, seed: int, on_epoch=None, watch=None) -> dict:
    """One seed's fine-tuning; returns its record (per-epoch dev scores, best epoch, test),
    or a diverged seed's (`divergence.record`), and leaves the best epoch's weights in the
    model. `watch` (`interruption.Watch`) stops the training at a batch end when a SIGTERM
    came; the seed then raises `Interrupted`."""
    started = time.perf_counter()
    data, recipe = models.data, models.recipe
    model = models.start(seed)
    epochs, best, best_weights = [], None, None
    for epoch in range(1, recipe.epochs + 1):
        arrays = training_arrays(data.train, seed, epoch, recipe.batch_size, models.devices)
        loss, stopped = fit_epoch(model, arrays, seed, epoch, watch)
        if stopped:
            epochs.append({"epoch": epoch, "train_loss": None, "stopped": stopped})
            return divergence.record(seed, epochs, stopped, _since(started))
        predicted = predictions(
            model, data.dev[0], data.task_type, recipe.batch_size, models.devices
        )
        dev = scores(data.task_type, data.num_outputs, data.dev[1], predicted)
        entry = {
            "epoch": epoch,
            "train_loss": loss,
            "dev": dev,
            "distinct_predictions": int(len(np.unique(predicted))),
        }
        epochs.append(entry)
        if on_epoch:
            on_epoch(seed, entry)
        if better(dev[recipe.metric], best and best["dev"][recipe.metric], recipe.metric):
            best, best_weights = entry, model.get_weights()
    if best is None:
        return divergence.record(seed, epochs, divergence.NO_FINITE_DEV, _since(started))
    record = {"seed": seed, "best_epoch": best["epoch"], "dev": best["dev"], "epochs": epochs}
    # The best epoch's weights stay in the model: test is scored with them, and the caller
    # exports them (`best_export`) or starts other tasks from them (--mnli_start).
    model.set_weights(best_weights)
    if data.test is not None:
        predicted = predictions(
            model, data.test[0], data.task_type, recipe.batch_size, models.devices
        )
        if data.test[1] is None:  # unlabelled: the caller writes them (`unscored`)
            record["test_predictions"] = predicted
        else:
            record["test"] = scores(data.task_type, data.num_outputs, data.test[1], predicted)
    record["seconds"] = _since(started)
    return record


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 2)


def spread(values: list[float]) -> dict:
    """Mean, sample standard deviation (n - 1; 0 for one seed), median, min and max."""
    array = np.asarray(values, np.float64)
    std = float(array.std(ddof=1)) if len(array) > 1 else 0.0
    return {
        "mean": float(array.mean()),
        "std": std,
        "median": float(np.median(array)),
        "min": float(array.min()),
        "max": float(array.max()),
        "n": len(array),
    }


def summarise(records: list[dict], metric: str, constant: dict) -> dict:
    """Flags collapsed seeds (in place) and summarises every score over the seeds that have
    scores. A seed collapsed when it diverged (no scores: left out of every mean), when its
    best epoch gave every dev example the same answer, or when it scored no better than a
    constant answer (both counted in the mean, as peers average, and left out of
    `dev_excluding_collapsed`)."""
    scored = [r for r in records if not r.get("diverged")]
    for record in records:
        if record.get("diverged"):
            record["collapsed"] = True
            continue
        best = record["epochs"][record["best_epoch"] - 1] if "epochs" in record else {}
        record["collapsed"] = best.get("distinct_predictions") == 1 or is_collapsed(
            record["dev"][metric], constant[metric], metric
        )
    summary = {}
    for split in ("dev", "test"):
        rows = [r[split] for r in scored if split in r]
        if rows:
            summary[split] = {
                name: spread([row[name] for row in rows if row[name] is not None])
                for name in rows[0]
                if any(row[name] is not None for row in rows)
            }
    kept = [r["dev"][metric] for r in scored if not r["collapsed"]]
    summary["collapsed_seeds"] = [r["seed"] for r in records if r["collapsed"]]
    summary["diverged_seeds"] = [
        {"seed": r["seed"], "reason": r["diverged"]} for r in records if r.get("diverged")
    ]
    summary["seeds_in_mean"] = [r["seed"] for r in scored]
    summary["dev_excluding_collapsed"] = {metric: spread(kept)} if kept else None
    return summary
