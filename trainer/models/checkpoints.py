"""Writes and reads the weight files of training runs (`trainer/models/model_source.py` finds models
wherever a path points, using these readers).

Writing: `publish` saves a Keras weight file whole or not at all (local: temporary name, then
rename; gs://: one object upload), so a kill at any instant leaves either the previous file
or the new one. Reading: `restore_state` resumes a run from its newest *readable* backup, and
`newest_readable` picks the newest readable checkpoint, so a torn or foreign file is skipped
with one line instead of crashing a restart or an export.

Example:
    >>> publish(masked_lm, run.checkpoint(1000))
    >>> step = restore_state(run, trainer_model, masked_lm)
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import warnings

import keras

from common import fs
from common.errors import UserError
from trainer.run_folder import run_dir
from trainer.run_folder.run_dir import RunDir

# --- Writing -------------------------------------------------------------------------------


def publish(model, path: str, upload: bool = True) -> None:
    """`model.save_weights(path)`, atomically: a kill or an error leaves no partial file.

    The HDF5 file is built in memory (`weights_image`) and written with ordinary writes
    (local: a temporary name beside `path`, then a rename; gs://: one upload), never staged
    in the system's temporary folder (small on TPU VMs, while a `base` backup is ~1.5 GB).
    A full disk is then a plain OSError naming `path` (one line, `common/errors.run_cli`):
    h5py writing to a full disk itself raises again in its finaliser and the process dies
    of a segmentation fault at exit (seen with h5py 3, HDF5 1.14).

    Every process of a multi-process run calls this (`upload` only on the chief): saving runs
    collective device operations under JAX (and tf.distribute's multi-worker strategies
    expect every worker to save), so a chief saving alone would wait for the others."""
    image = weights_image(model)
    if upload:
        view = image.getbuffer()
        try:
            fs.upload_stream(path, (view[i : i + _CHUNK] for i in range(0, len(view), _CHUNK)))
        finally:
            view.release()


_CHUNK = 64 << 20


def weights_image(model) -> io.BytesIO:
    """The bytes `model.save_weights` would write (a `.weights.h5` file), in memory.

    Uses `keras.src.saving.saving_lib` (`H5IOStore` over a BytesIO, `_save_state`), what
    `save_weights` runs on a path; tests/trainer/models/test_checkpoints.py fails loudly if a
    Keras upgrade renames them."""
    from keras.src.saving import saving_lib

    if not model.built:
        raise ValueError("the model must be built before its weights are saved")
    image = io.BytesIO()
    store = saving_lib.H5IOStore(image, mode="w")
    try:
        saving_lib._save_state(
            model, weights_store=store, assets_store=None, inner_path="", visited_saveables=set()
        )
    finally:
        store.close()
    return image


def prune(paths_newest_first: list[str], keep: int) -> None:
    """Deletes all but the newest `keep` files (after a new one was published)."""
    fs.delete(paths_newest_first[max(keep, 1) :])


# --- Reading -------------------------------------------------------------------------------


def unreadable_reason(path: str) -> str | None:
    """None if `path` opens as a complete HDF5 weight file, else why not (cheap: h5py checks
    the file's recorded end against its size, which catches truncation)."""
    import h5py

    try:
        with _local(path) as local, h5py.File(local, "r") as f:
            if "layers" not in f and "vars" not in f:
                return "not a Keras weight file"
    except (OSError, ValueError) as err:
        return (str(err).strip().splitlines() or [type(err).__name__])[0]
    return None


class _local:
    """A local path for `path`: itself, or a temporary download of a gs:// file."""

    def __init__(self, path: str):
        self.path, self._tmp = path, None

    def __enter__(self) -> str:
        if not fs.is_remote(self.path):
            return self.path
        self._tmp = tempfile.TemporaryDirectory()
        local = os.path.join(self._tmp.name, fs.basename(self.path))
        fs.local_copy(self.path, local)
        return local

    def __exit__(self, *exc):
        if self._tmp is not None:
            self._tmp.cleanup()


def load_weights(model, path: str) -> None:
    with _local(path) as local:
        model.load_weights(local)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def newest_readable(paths_newest_first: list[str]) -> str | None:
    """The first readable file; each unreadable one is reported in one line and skipped.
    gs:// files are not downloaded to be checked: an object upload is all-or-nothing."""
    for path in paths_newest_first:
        reason = None if fs.is_remote(path) else unreadable_reason(path)
        if reason is None:
            return path
        _warn(f"skipping unreadable {path}: {reason}")
    return None


def has_trained(run: RunDir) -> bool:
    """Whether the run folder holds weights of a trained step (a backup or a checkpoint; none
    is written at step 0). Without one, a saved run_config only records a start."""
    return bool(run.backups() or run.checkpoints())


class UnreadableRunError(UserError):
    """A run folder whose saved state exists but cannot be read; one line for the user."""


def restore_state(run: RunDir, trainer_model, masked_lm) -> int:
    """Loads the newest readable backup (weights and optimizer, so the step too) and returns
    the optimizer step it holds; 0 for a run with no saved state.

    If backups exist but none is readable, the newest readable checkpoint is used instead:
    its weights, its step, and a fresh optimizer state (said in one warning). The model and
    optimizer must be built (`optimizer.build`) before this is called.
    """
    backups = run.backups()
    for path in backups:
        try:
            load_backup(trainer_model, path)
        except (OSError, ValueError, KeyError) as err:
            from trainer import backends

            if backends.peer_lost(err):  # the load is a collective on a pod: not the file
                raise
            _warn(f"skipping unreadable backup {path}: {str(err).splitlines()[0]}")
            continue
        return update_count(trainer_model.optimizer)
    if not backups:
        return 0
    checkpoint = newest_readable(run.checkpoints())
    if checkpoint is None:
        raise UnreadableRunError(
            f"{run.root} has {len(backups)} backup(s) and no checkpoint that can be read; "
            "move them away to restart from scratch, or use a new --output_dir."
        )
    load_weights(masked_lm, checkpoint)
    step = run_dir.step_of(checkpoint)
    optimizer = trainer_model.optimizer
    for variable in optimizer.variables:
        variable.assign(variable.numpy() * 0)
    set_update_count(optimizer, step)
    _warn(
        f"no readable backup: resuming from {checkpoint} at step {step} with a fresh "
        "optimizer state (moments restart at zero)."
    )
    return step


OPTIMIZER_VARS = "optimizer/vars"  # where Keras' weight file keeps the optimizer's state
_SKIPPED = "Skipping variable loading for optimizer"  # Keras' warning on another layout


def load_backup(trainer_model, path: str) -> None:
    """Weights and optimizer state of a backup, at the step its name gives. The split of the
    global batch may change at a restart: Keras saves its count of micro-batches, which
    under another --grad_accum_steps would read as another step, so the step is set from
    the name (a backup lies between updates). A backup written with accumulation switched
    the other way holds one accumulator per weight more or fewer: Keras would keep the
    weights but skip the whole optimizer (step 0, moments lost), so its state is mapped
    over by name."""
    import h5py

    optimizer, step = trainer_model.optimizer, run_dir.step_of(path)
    with _local(path) as local:
        with h5py.File(local, "r") as f:
            saved_count = len(f[OPTIMIZER_VARS]) if OPTIMIZER_VARS in f else 0
        if saved_count == len(optimizer.variables):
            trainer_model.load_weights(local)
            set_update_count(optimizer, step)
            return
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_SKIPPED)
            trainer_model.load_weights(local)  # the weights; the optimizer is skipped
        with h5py.File(local, "r") as f:
            _restore_other_layout(trainer_model, f[OPTIMIZER_VARS], saved_count, step, path)


def _restore_other_layout(trainer_model, saved, saved_count: int, step: int, path: str) -> None:
    """Assigns the optimizer state `saved` (h5 datasets "0", "1"..., written with
    accumulation the other way) by variable name: moments and velocities as saved,
    accumulators at zero (a backup lies between updates), the step of the file's name."""
    optimizer = trainer_model.optimizer
    other_steps = None if optimizer.gradient_accumulation_steps else 2  # any N > 1: same names
    layout = type(optimizer).from_config(
        {**optimizer.get_config(), "gradient_accumulation_steps": other_steps}
    )
    layout.build(trainer_model.trainable_variables)  # only for its variables' names, in order
    index = {variable.name: str(i) for i, variable in enumerate(layout.variables)}
    del layout
    if len(index) != saved_count:
        raise ValueError(
            f"its optimizer state has {saved_count} variables, this run's "
            f"{len(optimizer.variables)} (with or without accumulation "
            f"{len(index)}): not a backup of this model"
        )
    for variable in optimizer.variables:  # one array in memory at a time
        variable.assign(
            saved[index[variable.name]][()] if variable.name in index else variable.numpy() * 0
        )
    set_update_count(optimizer, step)  # the saved count is in its micro-batches
    print(
        f"{path}: optimizer state of another --grad_accum_steps restored exactly (step "
        f"{step}, moments as saved)."
    )


def latest_checkpoint(output_dir: str) -> str | None:
    """The newest readable checkpoint in `{output_dir}/checkpoints/`, or None."""
    return newest_readable(RunDir(output_dir).checkpoints())


def update_count(optimizer) -> int:
    """Optimizer updates done (under accumulation Keras derives this from its micro-batch
    count, a computed array on JAX rather than a variable)."""
    return int(keras.ops.convert_to_numpy(optimizer.iterations))


def micro_batches_per_update(optimizer) -> int:
    return optimizer.gradient_accumulation_steps or 1


def set_update_count(optimizer, updates: int) -> None:
    """Sets the optimizer to `updates` completed updates (no accumulation under way).

    `optimizer.iterations` is read-only under accumulation (Keras derives it from its
    micro-batch counter, the private `_iterations`), so the counter is set directly."""
    optimizer._iterations.assign(updates * micro_batches_per_update(optimizer))
