"""Any path to a model: what it is, and the keras-hub MaskedLM it holds.

Three layouts are accepted wherever a "model" path is asked for (export, predict, the demo):

- a training output dir (`trainer.run_folder.run_dir` names its files): the newest readable
checkpoint; - one `.weights.h5` file in such a dir's `checkpoints/` folder;
- a keras-hub preset written by `trainer.export` (`config.json`, `task.json`, weights, plus our
  `run_config.json` and `tokenizer/`).

Reading the weight files themselves is `trainer.models.checkpoints`' job.

Example:
    >>> source = resolve("runs/tiny")             # paths and configs only, no model built
    >>> source.kind, source.family.name, source.max_sequence_length
    ('checkpoint', 'roberta', 128)
    >>> masked_lm, record, tokenizer_dir = load_masked_lm("runs/tiny")
"""

from __future__ import annotations

import dataclasses
import posixpath

import keras_hub

from common import fs
from common.errors import UserError
from trainer import families
from trainer.families.family import Family
from trainer.models.checkpoints import load_weights, newest_readable, unreadable_reason
from trainer.models.model import build_masked_lm
from trainer.run_folder import run_dir
from trainer.run_folder.run_dir import RUN_CONFIG, TOKENIZER_DIR, WEIGHTS_SUFFIX, RunDir
from trainer.run_folder.run_record import RunRecord

# keras-hub preset files (keras_hub/src/utils/preset_utils.py).
PRESET_CONFIG = "config.json"
PRESET_TASK = "task.json"


class ModelNotFoundError(UserError):
    """A path holds no checkpoint or preset; the message is one sentence for the user."""


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """Where a model's weights, configuration and tokenizer are (found without loading it)."""

    kind: str  # "checkpoint" or "preset"
    path: str  # the .weights.h5 file, or the preset dir
    record: RunRecord  # its run_config.json (a preset's, completed from its config.json)
    tokenizer_dir: str | None

    @property
    def family(self) -> Family:
        return self.record.family

    @property
    def max_sequence_length(self) -> int:
        """The longest sequence to feed it (`RunRecord.max_sequence_length`)."""
        return self.record.max_sequence_length


def resolve(path: str) -> ModelSource:
    """Finds what `path` is (see the module docstring); raises ModelNotFoundError if nothing."""
    path = path.rstrip("/")
    is_file = path.endswith(WEIGHTS_SUFFIX)
    # gs:// has no folder objects to test for; only files are checked there.
    if (is_file or not fs.is_remote(path)) and not fs.exists(path):
        raise ModelNotFoundError(f"{path} does not exist.")
    if is_file:
        reason = unreadable_reason(path) if not fs.is_remote(path) else None
        if reason:
            raise ModelNotFoundError(f"{path} is not a readable weight file: {reason}.")
        # The file lies in {output_dir}/checkpoints/: the run config is two levels up.
        output_dir = posixpath.dirname(posixpath.dirname(path)) or "."
        return _checkpoint_source(path, output_dir)
    if fs.exists(fs.join(path, PRESET_CONFIG)):
        return _preset_source(path)
    if fs.exists(fs.join(path, RUN_CONFIG)):
        found = RunDir(path).checkpoints()
        checkpoint = newest_readable(found)
        if checkpoint is None:
            raise ModelNotFoundError(
                f"{path} is a training output dir but has no readable checkpoint "
                f"({len(found)} found in {run_dir.CHECKPOINTS_DIR}/, none readable)."
            )
        return _checkpoint_source(checkpoint, path)
    raise ModelNotFoundError(
        f"{path} is neither a training output dir ({RUN_CONFIG} + {run_dir.CHECKPOINTS_DIR}/), "
        f"a {WEIGHTS_SUFFIX} checkpoint nor a keras-hub preset ({PRESET_CONFIG})."
    )


def _checkpoint_source(checkpoint: str, output_dir: str) -> ModelSource:
    config_path = fs.join(output_dir, RUN_CONFIG)
    if not fs.exists(config_path):
        raise ModelNotFoundError(
            f"{checkpoint} is not inside a training output dir: {config_path} is missing."
        )
    tokenizer_dir = fs.join(output_dir, TOKENIZER_DIR)
    return ModelSource("checkpoint", checkpoint, RunRecord.read(config_path), tokenizer_dir)


def _preset_source(preset_dir: str) -> ModelSource:
    config = fs.read_json(fs.join(preset_dir, PRESET_CONFIG))
    if "model_type" in config:  # A Hugging Face dir: keras-hub would leave its LM head random.
        raise ModelNotFoundError(
            f"{preset_dir} is a Hugging Face transformers export; load it with "
            "transformers.AutoModelForMaskedLM, or give the keras-hub preset or checkpoint."
        )
    family = families.of_registered_name(config.get("registered_name"))
    if family is None or not fs.exists(fs.join(preset_dir, PRESET_TASK)):
        raise ModelNotFoundError(
            f"{preset_dir} is not a keras-hub masked LM preset of a {families.said()} "
            f"backbone (backbone {config.get('registered_name')!r}, {PRESET_TASK} needed)."
        )
    _check_task(preset_dir, family)
    run_config_path = fs.join(preset_dir, RUN_CONFIG)
    # Presets that we did not export have no run config: rebuild the part we use.
    saved = fs.read_json(run_config_path) if fs.exists(run_config_path) else {}
    record = RunRecord.of_preset(saved, family, _backbone_kwargs(config))
    tokenizer_dir = fs.join(preset_dir, TOKENIZER_DIR)
    if not fs.exists(fs.join(tokenizer_dir, "tokenizer.json")):
        tokenizer_dir = None
    return ModelSource("preset", preset_dir, record, tokenizer_dir)


def _check_task(preset_dir: str, family) -> None:
    """keras-hub builds the task that task.json names: a class it has not registered ends
    in its TypeError, another task (a classifier) in a MaskedLM with a random head."""
    task = fs.read_json(fs.join(preset_dir, PRESET_TASK))
    named = task.get("registered_name") if isinstance(task, dict) else None
    expected = family.task_registered_name()
    if named != expected:
        raise ModelNotFoundError(
            f"{preset_dir} is not a masked LM preset: its {PRESET_TASK} names {named!r}, "
            f"not the {family.name} masked LM {expected!r}."
        )


def _backbone_kwargs(preset_config: dict) -> dict:
    """Backbone constructor arguments from a preset `config.json` (minus Keras bookkeeping)."""
    keras_only = {"name", "trainable", "dtype"}
    return {k: v for k, v in preset_config["config"].items() if k not in keras_only}


def load_masked_lm(path: str):
    """Loads `(masked_lm, record, tokenizer_dir)` from any layout `resolve` accepts (`record`:
    its `RunRecord`). `tokenizer_dir` is None for a preset without our `tokenizer/` folder.

    Example:
        >>> masked_lm, record, tokenizer_dir = load_masked_lm("runs/tiny/checkpoints/"
        ...                                                   "ckpt-00000100.weights.h5")
        >>> record.family.name
        'roberta'
    """
    source = resolve(path)
    return load_source(source), source.record, source.tokenizer_dir


def load_source(source: ModelSource):
    """Builds the keras-hub MaskedLM of a resolved source and loads its weights, reading one
    text per row: the arguments only pretraining's packed rows use are None (a document
    separator would split a text that quotes `<s>` into two documents)."""
    family = source.family
    config = source.record.backbone_config
    one_text = family.one_document_per_row(config)
    if source.kind == "preset":
        if one_text == config:
            return keras_hub.models.MaskedLM.from_preset(source.path)
        one_text_args = {k: one_text[k] for k in family.packed_rows_only}
        backbone = keras_hub.models.Backbone.from_preset(source.path, **one_text_args)
        return keras_hub.models.MaskedLM.from_preset(source.path, backbone=backbone)
    masked_lm = build_masked_lm(family, one_text)
    load_weights(masked_lm, source.path)
    return masked_lm
