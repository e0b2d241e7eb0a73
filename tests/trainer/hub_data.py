"""A Hugging Face datasets cache, built offline, that holds datasets "downloaded" by name.

What `load_dataset("owner/name", "config")` leaves behind on a machine with a network is
`HF_DATASETS_CACHE/owner___name/config/VERSION/COMMIT/` (Arrow files and dataset_info.json),
and offline `load_dataset` resolves the same name from there (datasets' cache fallback). The
helper makes that folder the way datasets itself writes it: a folder of parquet files with a
README.md dataset card declaring the config (`configs:`, the layout of a Hub repository) is
loaded with `load_dataset` into the cache, and its cache folder is renamed to the repository's
name and a commit. No network is touched.
"""

from __future__ import annotations

import os
import shutil

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _card(config: str, splits) -> str:
    lines = ["---", "configs:", f"- config_name: {config}", "  data_files:"]
    for split in splits:
        lines += [f"  - split: {split}", f"    path: data/{split}.parquet"]
    return "\n".join([*lines, "---", "# A test dataset", ""])


def offline(monkeypatch, cache) -> None:
    """datasets reads HF_DATASETS_OFFLINE / HF_DATASETS_CACHE once, at import: set what it
    read, as those variables would have."""
    import datasets
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))


def add(cache, repo_id: str, config: str, splits: dict, features, commit: str = COMMIT) -> str:
    """Puts `repo_id`'s `config` ({split: {column: values}}) into the datasets cache `cache`
    as a by-name load would; returns the cache folder."""
    import datasets

    owner, name = repo_id.split("/")
    source = os.path.join(str(cache), "..", f"source-{owner}-{name}-{config}", name)
    os.makedirs(os.path.join(source, "data"), exist_ok=True)
    for split, columns in splits.items():
        table = datasets.Dataset.from_dict(columns, features=features)
        table.to_parquet(os.path.join(source, "data", f"{split}.parquet"))
    with open(os.path.join(source, "README.md"), "w") as card:
        card.write(_card(config, splits))
    scratch = os.path.join(str(cache), "..", "scratch-cache")
    datasets.load_dataset(source, config, cache_dir=scratch)
    built = os.path.join(scratch, name, config)
    (version,) = os.listdir(built)
    (folder,) = [f for f in os.listdir(os.path.join(built, version)) if "." not in f]
    target = os.path.join(str(cache), f"{owner}___{name}", config, version, commit)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.move(os.path.join(built, version, folder), target)
    shutil.rmtree(scratch)
    return target
