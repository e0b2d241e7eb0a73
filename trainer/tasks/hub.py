"""Hugging Face datasets by name (`--hf_dataset owner/name`), read through `datasets.load_dataset`,
or from a `DatasetDict.save_to_disk` folder (the local copy to pass where there is no network).

`load_dataset` resolves a name on the Hub when the network allows; without it
(`HF_DATASETS_OFFLINE=1` / `HF_HUB_OFFLINE=1`, or a connection that fails) it falls back on
the local datasets cache (`HF_DATASETS_CACHE`, default ~/.cache/huggingface/datasets) that an
earlier `load_dataset` of the same name filled: `OWNER___NAME/CONFIG/VERSION/COMMIT/`. A name
that is neither reachable nor cached is one line saying so and how to pass a local copy,
never a traceback; the library's own retry warnings are kept quiet meanwhile.

The revision recorded is the one the data came from: datasets caches a Hub dataset in a folder
named after the repository's commit, so the folder of the loaded split's Arrow files names it
(for a local folder given as `--hf_dataset`, datasets' hash of its files); each split's
`_fingerprint` (datasets' hash of its content and history) is recorded too.

Example:
    >>> hub = load("nyu-mll/glue", "sst2", hint="--glue_dir DIR")
    >>> used = choose_splits(hub, {"train": None, "dev": None, "test": None})
    >>> hub.provenance(used)["revision"]   # the commit it resolved to
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os

from common.errors import UserError

DEV_NAMES = ("validation", "dev", "valid")
NO_TEST = "none"
LOCAL_COPY = (
    "where the network allows, load it once to fill the datasets cache (HF_DATASETS_CACHE), "
    "or save_to_disk(DIR) and pass {copy}"
)


@dataclasses.dataclass
class HubDataset:
    name: str
    config: str | None
    requested_revision: str | None
    splits: dict  # split name -> datasets.Dataset
    local: bool = False  # a save_to_disk folder: no revision, its fingerprints say what it is

    @property
    def revision(self) -> str | None:
        """The commit (folder) the cached Arrow files of the first split lie in."""
        if self.local:
            return None
        for dataset in self.splits.values():
            files = dataset.cache_files
            if files:
                return os.path.basename(os.path.dirname(files[0]["filename"]))
        return None

    @property
    def title(self) -> str:
        """`owner/name (config)`, as messages name the dataset."""
        return self.name + (f" ({self.config})" if self.config else "")

    def label(self, split: str) -> str:
        """How messages and results name one split: `owner/name (config) split`."""
        return f"{self.title} {split}"

    def said(self, used: dict, sizes: dict, notes=()) -> str:
        """The line that says which splits were used: `dataset: NAME (CONFIG) at revision R:
        train = train (N), dev = validation (M)`."""
        shown = ", ".join(f"{ours} = {theirs} ({sizes[ours]})" for ours, theirs in used.items())
        return f"dataset: {self.title} at revision {self.revision}: {shown}" + "".join(
            f"; {note}" for note in notes
        )

    def provenance(self, used: dict) -> dict:
        """What results.json records: id, config, revisions, {our split: its split}."""
        return {
            "id": self.name,
            "config": self.config,
            "revision": self.revision,
            "requested_revision": self.requested_revision,
            "splits": dict(used),
            "fingerprints": {
                ours: self.splits[theirs]._fingerprint for ours, theirs in used.items()
            },
            "loader": "datasets.load_from_disk" if self.local else "datasets.load_dataset",
            "local": self.local,
        }


@contextlib.contextmanager
def _quiet():
    """huggingface_hub warns on every retry of a failed connection, datasets on every cache
    fallback: the one line this command prints says it instead."""
    loggers = [logging.getLogger(name) for name in ("huggingface_hub", "datasets")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _one_line(err: BaseException) -> str:
    return "; ".join(line.strip() for line in str(err).splitlines() if line.strip())


def is_saved_folder(name: str) -> bool:
    """Whether `name` is a local `DatasetDict.save_to_disk` folder (not a name on the Hub)."""
    return os.path.isfile(os.path.join(name, "dataset_dict.json"))


def load(name: str, config: str | None = None, revision: str | None = None, *, hint: str):
    """The named dataset's splits (a HubDataset); `hint` says how to pass a local copy
    instead (the flag), for the message when it cannot be fetched."""
    import datasets
    import httpx
    from datasets.exceptions import DatasetNotFoundError
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    if os.path.isfile(os.path.join(name, datasets.config.DATASET_STATE_JSON_FILENAME)):
        raise UserError(  # Dataset.save_to_disk: one split, no name to choose train or dev by
            f"{name} holds one split (a datasets.Dataset), not a DatasetDict: pass it as "
            "--train or --dev (a save_to_disk folder of one split), or save the DatasetDict "
            "whose splits --train_split and --dev_split name"
        )
    if os.path.isfile(os.path.join(name, "dataset_dict.json")):  # DatasetDict.save_to_disk
        return HubDataset(name, config, None, dict(datasets.load_from_disk(name)), local=True)
    what = f"the Hugging Face dataset {name!r}" + (f" (config {config!r})" if config else "")
    try:
        with _quiet():
            loaded = datasets.load_dataset(name, config, revision=revision, keep_in_memory=False)
    except DatasetNotFoundError as err:
        raise UserError(f"{what} was not found: {_one_line(err)}") from None
    except (ConnectionError, LocalEntryNotFoundError, httpx.TransportError, HfHubHTTPError) as err:
        raise _unfetched(what, err, hint) from None
    except (ValueError, FileNotFoundError) as err:  # a config or revision it does not have
        if "Couldn't find cache" in str(err):  # the cache fallback holds other configs only
            raise _unfetched(what, err, hint) from None
        raise UserError(f"cannot load {what}: {_one_line(err)}") from None
    return HubDataset(name, config, revision, dict(loaded))


def _unfetched(what: str, err: BaseException, hint: str) -> UserError:
    import datasets

    offline = " (offline mode is on)" if datasets.config.HF_HUB_OFFLINE else ""
    return UserError(
        f"could not fetch {what}{offline}, and the local datasets cache does not hold it "
        f"({_one_line(err)}): {LOCAL_COPY.format(copy=hint)}"
    )


def choose_splits(hub: HubDataset, wanted: dict) -> dict:
    """{train, dev[, test]: the dataset's split}: the names asked for, else train, the first
    of validation/dev/valid, and test where it exists and is not the dev split (`none` drops
    it)."""
    available = list(hub.splits)
    chosen = {}
    for ours, asked in wanted.items():
        if asked == NO_TEST and ours == "test":
            continue
        if asked is None:
            defaults = {"train": ("train",), "dev": DEV_NAMES, "test": ("test",)}[ours]
            asked = next((n for n in defaults if n in available), None)
            if ours == "test" and asked in (None, chosen.get("dev")):
                continue  # none, or the split that already selects the epoch
            if asked is None:
                raise UserError(
                    f"{hub.title} has no {' or '.join(defaults)} split (its splits: "
                    f"{', '.join(available)}): name one with --{ours}_split"
                )
        if asked not in available:
            raise UserError(
                f"{hub.title} has no split {asked!r} (--{ours}_split); its splits: "
                f"{', '.join(available)}"
            )
        chosen[ours] = asked
    return chosen


def unlabelled(rows: list[dict], column: str) -> bool:
    """Whether every label of a split is missing or -1 (test splits without public labels,
    GLUE's among them, carry -1)."""
    return all(row.get(column) in (None, -1, -1.0) for row in rows)
