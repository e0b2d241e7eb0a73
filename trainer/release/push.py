"""Pushes an export to a hub with the libraries' own APIs.

- keras-hub preset: `keras_hub.upload_preset(uri, folder)` (hf:// and kaggle://).
- the transformers folder: `huggingface_hub.HfApi.create_repo` + `upload_folder`
  (`common/hf_push.py`, which the tokenizer push uses too).

Credentials come the libraries' own way: `HF_TOKEN` or `hf auth login` (huggingface_hub);
`KAGGLE_USERNAME`/`KAGGLE_KEY`, `KAGGLE_API_TOKEN` or `~/.kaggle/kaggle.json` (kagglehub).
This module only asks whether one exists (`check_credentials`, so a long run fails at its
start rather than after training); it never reads, prints or writes a secret.

Example:
    >>> push_export({"keras-hub": "out/keras-hub", "hf": "out/hf"},
    ...             {"keras-hub": "hf://org/m-keras-hub", "hf": "hf://org/m"})
    {'keras-hub': 'https://huggingface.co/org/m-keras-hub', 'hf': 'https://huggingface.co/org/m'}
"""

from __future__ import annotations

import os

import huggingface_hub
import kagglehub.config
import keras_hub
import requests  # kagglehub's HTTP client

from common import hf_push, publish
from common.hf_push import PushError, local_folder
from trainer.release import model_card

README = model_card.README
# kagglehub raises requests' errors (KaggleApiHTTPError is one); keras-hub raises ValueError
# for a handle the Hub refuses.
_FAILURES = (*hf_push.FAILURES, requests.RequestException, ValueError)


def check_credentials(target: publish.Target) -> None:
    """Raises PushError if the target's library finds no credentials (checked locally)."""
    if target.hub == publish.HF:
        hf_push.check_token(target)
    if target.hub == publish.KAGGLE and kagglehub.config.get_kaggle_credentials() is None:
        raise PushError(
            f"no Kaggle credentials for --push_to {target.uri}: set "
            "KAGGLE_USERNAME and KAGGLE_KEY or write ~/.kaggle/kaggle.json first."
        )


def push_preset(folder: str, target: publish.Target) -> str:
    """`keras_hub.upload_preset`; returns where the preset went.

    On hf://, keras-hub writes its own generic README.md over ours when the repository has
    none yet, uploads it, then deletes README.md from the folder (keras_hub 0.32
    `preset_utils.upload_preset`). So our card is uploaded first: keras-hub then finds a
    card on the Hub and leaves the folder's card alone.
    """
    try:
        with local_folder(folder) as local:
            if target.hub == publish.HF and os.path.exists(os.path.join(local, README)):
                api = huggingface_hub.HfApi()
                api.create_repo(target.repo_id, exist_ok=True)
                api.upload_file(
                    path_or_fileobj=os.path.join(local, README),
                    path_in_repo=README,
                    repo_id=target.repo_id,
                    commit_message="Model card",
                )
            keras_hub.upload_preset(target.uri, local)
    except _FAILURES as err:
        raise hf_push.failed(target.uri, err) from None
    return target.uri


def push_export(paths: dict[str, str], repos: dict[str, publish.Target]) -> dict[str, str]:
    """Pushes each exported format folder (`paths`) to its target (`repos`, from
    `common.publish.repos_for`); returns {format: where it went}."""
    done = {}
    for fmt, target in repos.items():
        if fmt == publish.KERAS_HUB_FORMAT:
            done[fmt] = push_preset(paths[fmt], target)
        else:
            done[fmt] = hf_push.push_folder(paths[fmt], target, "Upload the transformers export")
    return done
