"""A run's `run_config.json` as typed fields: the one module that reads it and writes it.

What the trainer records of a run (its family, size, backbone, trained length, tokenizer, the
model it continued from, its recipe and data) travels as a `RunRecord`: export, the card,
predict and fine-tuning read these fields, never the file's keys. `raw` is the file as saved:
the pretraining plan compares it key by key on a restart (trainer/pretraining/plan.py FIXED),
and `write` writes it back unchanged, byte for byte.

Example:
    >>> record = RunRecord.read("runs/tiny/run_config.json")
    >>> record.family.name, record.size, record.max_sequence_length
    ('roberta', 'tiny', 128)
"""

from __future__ import annotations

import copy
import dataclasses

from common import fs
from common.errors import UserError
from trainer import families
from trainer.families.family import Family
from trainer.run_folder.attempts import AttemptRecipe

# The size a run continued from a model (--init_from) records: that model's, not a named one.
FROM_INIT = "from --init_from"
# The key only an export writes: the weights its preset was exported from (a checkpoint, or
# another export), which the card follows back to the run.
EXPORTED_FROM = "exported_from"


class RunRecordError(UserError):
    """A run_config.json that records no run this trainer can read; one line."""


@dataclasses.dataclass(frozen=True)
class RunRecord:
    family: Family  # looked up once, from the saved name
    size: str | None  # the named size; None for a model --init_from gave, or one made elsewhere
    backbone_config: dict  # the backbone's arguments
    max_length: int | None  # the length it trained at (None: a preset made elsewhere)
    tokenizer: dict  # `common.tokenizer_files.TokenizerInfo.to_dict()`; {} where not recorded
    init_from: dict | None  # `trainer.models.starting_point.Initial.record()`; None: scratch
    recipe: AttemptRecipe  # the latest attempt's (trainer/run_folder/attempts.py)
    attempts: tuple  # each attempt's recorded recipe, oldest first (`attempts.spans` reads them)
    seed: int | None
    eval_seed: int | None
    masking: str | None
    mlm_probability: float | None
    train_data: str | None
    eval_data: str | None
    train_data_digest: str | None
    input_pipelines: int | None
    max_eval_batches: int | None
    exported_from: str | None  # an export's: see EXPORTED_FROM
    raw: dict  # the whole file as saved

    @classmethod
    def from_dict(cls, saved: dict) -> RunRecord:
        """The record of a run config; RunRecordError where it names no family we know."""
        if not isinstance(saved, dict) or "family" not in saved or "backbone_config" not in saved:
            raise RunRecordError("a run config records its family and backbone_config")
        try:
            family = families.get(saved["family"])
        except ValueError as err:
            raise RunRecordError(str(err)) from None
        return cls.of(saved, family)

    @classmethod
    def of_preset(cls, saved: dict, family: Family, backbone_config: dict) -> RunRecord:
        """A keras-hub preset's record: its run_config.json (ours; {} for a preset made
        elsewhere) with the family and backbone arguments its config.json gives."""
        return cls.of({**saved, "family": family.name, "backbone_config": backbone_config}, family)

    @classmethod
    def read(cls, path: str) -> RunRecord:
        """The record of the run_config.json at `path` (local or gs://)."""
        try:
            return cls.from_dict(fs.read_json(path))
        except RunRecordError as err:
            raise RunRecordError(f"{path}: {err}") from None

    @classmethod
    def of(cls, saved: dict, family: Family) -> RunRecord:
        """The record of a run config whose family is known (the run the trainer writes,
        its family looked up once from the flags or the checkpoint it continues)."""
        # Written twice (as `model` and `size`); after --init_from `model` is the flag's
        # unused default and `size` says so. Folders older than `size` have `model` only.
        named = saved["size"] if "size" in saved else saved.get("model")
        return cls(
            family=family,
            size=None if named == FROM_INIT else named,
            backbone_config=saved["backbone_config"],
            max_length=saved.get("max_length"),
            tokenizer=saved.get("tokenizer") or {},
            init_from=saved.get("init_from"),
            recipe=AttemptRecipe.of(saved),
            attempts=tuple(saved.get("attempts") or ()),
            seed=saved.get("seed"),
            eval_seed=saved.get("eval_seed"),
            masking=saved.get("masking"),
            mlm_probability=saved.get("mlm_probability"),
            train_data=saved.get("train_data"),
            eval_data=saved.get("eval_data"),
            train_data_digest=saved.get("train_data_digest"),
            input_pipelines=saved.get("input_pipelines"),
            max_eval_batches=saved.get("max_eval_batches"),
            exported_from=saved.get(EXPORTED_FROM),
            raw=saved,
        )

    def to_dict(self) -> dict:
        """The run config as saved (a copy): `write` gives the same bytes it was read from."""
        return copy.deepcopy(self.raw)

    def write(self, path: str) -> None:
        """Writes run_config.json whole (`common.fs.write_json`: sorted keys, indented)."""
        fs.write_json(path, self.raw)

    def exported(self, weights: str) -> RunRecord:
        """The record an export writes beside its preset: this run's, naming the weights
        (`weights`: a checkpoint, or the export they came from)."""
        return dataclasses.replace(
            self, exported_from=weights, raw={**self.raw, EXPORTED_FROM: weights}
        )

    def flag(self, name: str):
        """The value the run recorded for the pretraining flag `name` (run_config.json keeps
        every flag under its own name), None where it records none: what a restart keeps of
        a flag it leaves open (trainer/pretraining/pretrain_recipe.py)."""
        return self.raw.get(name)

    @property
    def data_phases(self) -> tuple:
        """The training data and masking rate by phase (--phases; phase 0 the run's own),
        oldest first, as run_config.json's `data_phases` records them; () where it records
        none (a run from before phases)."""
        return tuple(self.raw.get("data_phases") or ())

    @property
    def max_sequence_length(self) -> int | None:
        """The longest sequence to feed the model: its position table's length, or where it
        has none (rotary positions), the length it was trained at."""
        positions = self.family.max_positions(self.backbone_config)
        return positions if positions is not None else self.max_length
