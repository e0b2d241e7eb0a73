"""Pushes a folder to a Hugging Face Hub model repository with `huggingface_hub`'s own API
(`HfApi.create_repo` + `upload_folder`), for the tokenizer and the transformers export.

Credentials are the library's: `HF_TOKEN` or the file `hf auth login` writes. This module only
asks the library whether it has one (`check_token`), so a command fails before its work, not
after; it never reads, prints or writes the token.

Example:
    >>> push_folder("runs/tok", publish.parse("hf://my-org/my-tokenizer"), "Upload tokenizer")
    'https://huggingface.co/my-org/my-tokenizer'
"""

from __future__ import annotations

import contextlib
import os
import tempfile

import httpx2  # the HTTP client huggingface_hub 2.x raises errors from
import huggingface_hub
from huggingface_hub.errors import HfHubHTTPError

from common import fs, publish
from common.errors import UserError

# ValueError: the Hub refused a README.md's metadata (HfApi._validate_yaml).
FAILURES = (HfHubHTTPError, httpx2.HTTPError, ValueError)


class PushError(UserError):
    """A push that cannot start or did not go through; one line for the user."""


def check_token(target: publish.Target) -> None:
    if huggingface_hub.get_token() is None:
        raise PushError(
            f"no Hugging Face token for --push_to {target.uri}: set HF_TOKEN or "
            "run `hf auth login` first."
        )


def failed(uri: str, err: Exception) -> PushError:
    """One line from a library's error (their messages carry no token)."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    status = getattr(getattr(err, "response", None), "status_code", None)
    hint = (
        " (check the token: HF_TOKEN or `hf auth login`, with write access to that organisation)"
        if status in (401, 403)
        else ""
    )
    return PushError(f"push to {uri} failed: {first}{hint}")


@contextlib.contextmanager
def local_folder(folder: str):
    """`folder` itself, or a local copy of a gs:// folder (the libraries upload local files)."""
    if not fs.is_remote(folder):
        yield folder
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = folder.rstrip("/") + "/"
        for path in fs.glob(root + "**"):
            local = os.path.join(tmp, path[len(root) :])
            os.makedirs(os.path.dirname(local), exist_ok=True)
            fs.local_copy(path, local)
        yield tmp


def push_folder(folder: str, target: publish.Target, message: str, ignore: tuple = ()) -> str:
    """create_repo (if absent) + upload_folder (less the `ignore` globs); returns the
    repository's URL."""
    api = huggingface_hub.HfApi()
    try:
        url = api.create_repo(target.repo_id, exist_ok=True)
        with local_folder(folder) as local:
            api.upload_folder(
                repo_id=target.repo_id,
                folder_path=local,
                commit_message=message,
                ignore_patterns=list(ignore) or None,
            )
    except FAILURES as err:
        raise failed(target.uri, err) from None
    return str(url)
