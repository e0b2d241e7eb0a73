"""Which folder an export may replace: an earlier export, and nothing else.

An export is written whole into `--output_dir` (`folder_swap.whole_folder`), so whatever the folder
held before is deleted. It may hold an earlier export of any format (one may replace another),
recognised by what only the export writes: the model card's first paragraph
(`card_text.SIGNATURE`), or our `run_config.json` naming what it was `exported_from`; and it may
hold nothing an export never writes. A transformers `save_pretrained` folder, a keras-hub preset
of someone else's, a project with a `config.json` beside `src/`: refused in one line naming a
file, before the model is loaded.

Example:
    >>> check_replaceable("exports/tiny")   # an earlier export, or missing, or empty: no error
"""

from __future__ import annotations

import os
import re

from common import fs, tokenizer_files
from common.errors import UserError
from trainer.release import card_text
from trainer.release import sentence_transformers_export as st_export
from trainer.release.model_card import README
from trainer.run_folder import run_dir
from trainer.run_folder.run_record import RunRecord, RunRecordError

# What `tokenizer_files.copy` writes.
_TOKENIZER_FILES = (
    tokenizer_files.TOKENIZER_JSON,
    tokenizer_files.SPECIAL_TOKENS_MAP,
    tokenizer_files.TOKENIZER_CONFIG,
)
# What `export_hf` writes, and `export_keras_hub` (keras-hub's `save_to_preset`: its config,
# metadata and weights, sharded weights with their index, a preprocessor's configs and assets;
# then our run_config.json and tokenizer/ folder), and the sentence-transformers export (hf's
# files and its modules' configs). Every format writes the card.
_TOKENIZER = "(" + "|".join(map(re.escape, _TOKENIZER_FILES)) + ")"
_HF_FILES = r"config\.json|model\.safetensors|" + _TOKENIZER
_HF = re.compile(_HF_FILES)
_ST = re.compile(_HF_FILES + "|" + "|".join(map(re.escape, st_export.FILES)))
_KERAS_HUB = re.compile(
    r"(config|metadata|task|preprocessor|tokenizer|image_converter|audio_converter)\.json"
    r"|(model|task)(_\d+)?\.weights\.h5|(model|task)\.weights\.json|assets/.+"
    rf"|{re.escape(run_dir.RUN_CONFIG)}|{re.escape(run_dir.TOKENIZER_DIR)}/{_TOKENIZER}"
)
FORMAT_FILES = {"hf": _HF, "keras-hub": _KERAS_HUB, st_export.FORMAT: _ST}
# What `--format all` writes, each in its own subfolder.
ALL = ("hf", "keras-hub")


class NotAnExportError(UserError):
    """The output folder holds files that are not an earlier export's."""


# Where an export puts each format: one format in the folder itself, or `all`'s subfolders.
LAYOUTS = [{"": f} for f in FORMAT_FILES] + [{f"{f}/": f for f in ALL}]


def check_replaceable(output_dir: str) -> None:
    """Returns when `output_dir` is missing, empty or an earlier export; otherwise raises
    NotAnExportError naming a file."""
    folder = output_dir.rstrip("/")
    files = _relative(folder)
    if not files:
        return
    stray = [n for n in files if not any(_fits(layout, n) for layout in LAYOUTS)]
    fitting = [layout for layout in LAYOUTS if all(_fits(layout, n) for n in files)]
    if stray:
        why = f"it holds {stray[0]}, which an export never writes"
    elif not fitting:
        why = f"it holds {files[0]} beside files of another export layout"
    elif any(_cards_are_ours(folder, files, layout) for layout in fitting):
        return
    else:
        why = f"it holds {files[0]} but no model card ({README}) that an export writes"
    raise NotAnExportError(
        f"{folder} is not an earlier output of trainer.export ({why}); it would be replaced "
        "whole: choose another --output_dir or empty it."
    )


def _fits(layout: dict[str, str], name: str) -> bool:
    prefix = next((p for p in layout if name.startswith(p)), None)
    return prefix is not None and _writes(layout[prefix], name[len(prefix) :])


def _cards_are_ours(folder: str, files: list[str], layout: dict[str, str]) -> bool:
    """Each format folder of `layout` that holds files is recognised as our export's."""
    for prefix in layout:
        inside = [n[len(prefix) :] for n in files if n.startswith(prefix)]
        where = fs.join(folder, prefix.rstrip("/")) if prefix else folder
        if inside and not _is_ours(where, inside):
            return False
    return True


def _writes(fmt: str, name: str) -> bool:
    return bool(FORMAT_FILES[fmt].fullmatch(name)) or name == README


def _is_ours(folder: str, names: list[str]) -> bool:
    """The folder's card (or run_config.json) is one only our export writes."""
    if README in names and card_text.SIGNATURE in _text(fs.join(folder, README)):
        return True
    if run_dir.RUN_CONFIG in names:  # only an export's names what it was exported from
        try:
            return RunRecord.read(fs.join(folder, run_dir.RUN_CONFIG)).exported_from is not None
        except (ValueError, RunRecordError):
            return False
    return False


def _text(path: str) -> str:
    return fs.read_bytes(path).decode("utf-8", errors="replace")


def _relative(folder: str) -> list[str]:
    if not fs.is_remote(folder) and not os.path.isdir(folder):
        return []
    return sorted(p[len(folder) + 1 :].replace(os.sep, "/") for p in fs.files_under(folder))
