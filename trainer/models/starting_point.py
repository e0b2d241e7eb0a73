"""The model `--init_from` starts from (`Initial`: found and checked without loading its
weights, by trainer/models/init_from.py) and what the run's data must agree on with it: its
tokenizer and its positions, checked before anything is built.

Example:
    >>> check_tokenizer(initial, info, "runs/demo/tokenizer")   # one line where they differ
    >>> check_length(initial, max_length=512)
"""

from __future__ import annotations

import dataclasses

from common import tokenizer_files
from common.errors import UserError
from trainer.families.family import Family
from trainer.models import model_source


class InitFromError(UserError):
    """--init_from names something the trainer cannot start from; one line for the user."""


@dataclasses.dataclass(frozen=True)
class Initial:
    """A model to start from, found and checked without loading its weights."""

    kind: str  # "hf" or a model_source kind ("checkpoint", "preset")
    path: str  # the folder (hf, preset) or the .weights.h5 file
    family: Family
    backbone_config: dict
    tokenizer: tokenizer_files.TokenizerInfo | None  # None: the checkpoint ships none
    pad_id: int | None
    digest: str  # sha256 over the config and weight files
    hub_id: str | None = None  # the Hub repo `path` was downloaded from
    revision: str | None = None  # its commit (the snapshot folder's name in the cache)

    def record(self) -> dict:
        """What run_config.json keeps (a restart with another model is refused by it): a
        Hub id as itself and its commit, not as this machine's download folder."""
        if self.hub_id is None:
            return {"path": self.path, "kind": self.kind, "digest": self.digest}
        return {
            "path": self.hub_id,
            "revision": self.revision,
            "kind": self.kind,
            "digest": self.digest,
        }


def check_tokenizer(initial: Initial, info, tokenizer_dir: str) -> None:
    """The data's tokenizer must be the checkpoint's: same file (when it ships one), same
    vocabulary size as its embeddings, same padding id."""
    vocab = initial.backbone_config["vocabulary_size"]
    theirs = initial.tokenizer
    if theirs is not None and theirs.fingerprint != info.fingerprint:
        raise InitFromError(
            f"the data's tokenizer ({tokenizer_dir}, sha256 {info.fingerprint[:12]}) is not "
            f"the one {initial.path} ships ({theirs.fingerprint[:12]}); prepare the data with "
            f"--tokenizer {_tokenizer_folder(initial)}."
        )
    if not initial.family.fits_tokenizer(initial.backbone_config, info.vocab_size):
        raise InitFromError(
            f"the data's tokenizer has {info.vocab_size} tokens, {initial.path} "
            f"has {vocab} embeddings; prepare the data with its tokenizer."
        )
    if theirs is not None and theirs.special_token_ids != info.special_token_ids:
        raise InitFromError(
            f"the data's special token ids {info.special_token_ids} are not "
            f"{initial.path}'s {theirs.special_token_ids}."
        )
    if initial.pad_id is not None and initial.pad_id != info.pad_id:
        raise InitFromError(
            f"the data pads with id {info.pad_id}, {initial.path} with "
            f"{initial.pad_id}; prepare the data with its tokenizer."
        )


def _tokenizer_folder(initial: Initial) -> str:
    if initial.kind == "hf":
        return initial.path
    found = model_source.resolve(initial.path).tokenizer_dir
    if found is None and initial.kind == "preset":  # keras-hub's assets: convert them first
        return (
            "DIR, written by `python -m trainer.keras_hub_presets --preset "
            f"{initial.hub_id or initial.path} --output_dir DIR`"
        )
    return found or initial.path


def check_length(initial: Initial, max_length: int) -> None:
    """Sequences longer than the checkpoint's positions are refused before anything is built
    (a RoBERTa table of N rows holds N - pad_id - 1 positions: HF numbers them after pad)."""
    family = initial.family
    positions = family.max_positions(initial.backbone_config)
    if positions is not None and max_length > positions:
        note = (
            f" (max_position_embeddings less the {initial.pad_id + 1} rows "
            f"{family.hf_masked_lm_class} reserves for pad_id + 1)"
            if family.hf_positions_after_pad and initial.kind == "hf"
            else ""
        )
        raise InitFromError(
            f"the data's sequences have {max_length} tokens, but {initial.path}"
            f" has positions for {positions}{note}; prepare the data with "
            f"--max_length {positions} or less."
        )
