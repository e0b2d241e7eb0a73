"""Where a model or tokenizer is published: `--push_to` targets, checked before any work.

Two hubs, spelled as keras-hub's `upload_preset` spells them:

- `hf://ORG/NAME`: a Hugging Face Hub model repository. The organisation (or user name) is
  required, so that the loading instructions in the model card are exact.
- `kaggle://OWNER/MODEL/keras/VARIATION`: a Kaggle model variation; keras-hub uploads presets
  there (`kagglehub.model_upload`), so only the keras-hub preset can go to Kaggle.

An export in both formats pushed to `hf://ORG/NAME` puts the transformers folder in
`ORG/NAME` (what the Hub's widgets, `pipeline` and `from_pretrained` read) and the keras-hub
preset in `ORG/NAME-keras-hub`: both formats have a `config.json` at the root, and
`keras_hub.models.MaskedLM.from_preset("hf://...")` reads only a repository's root. The
sentence-transformers export (a format of its own, never in `all`) goes to `ORG/NAME` as well.

Example:
    >>> parse("hf://my-org/roberta-tiny").repo_id
    'my-org/roberta-tiny'
    >>> {f: t.uri for f, t in repos_for(parse("hf://my-org/roberta-tiny"),
    ...                                  ("keras-hub", "hf")).items()}
    {'keras-hub': 'hf://my-org/roberta-tiny-keras-hub', 'hf': 'hf://my-org/roberta-tiny'}
"""

from __future__ import annotations

import dataclasses
import re

from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from common import card_metadata
from common.errors import UserError
from common.flags import flag

HF, KAGGLE = "hf", "kaggle"
KERAS_HUB_FORMAT, HF_FORMAT, ST_FORMAT = "keras-hub", "hf", "sentence-transformers"
# The formats whose folder is a Hub repository's root as it is (a transformers model).
_REPO_ROOT_FORMATS = (HF_FORMAT, ST_FORMAT)
PRESET_SUFFIX = "-keras-hub"
_HF_NAME_MAX = 96  # characters of a Hub repository name (huggingface_hub validate_repo_id)
_KAGGLE_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_EXAMPLES = "hf://ORG/NAME or kaggle://OWNER/MODEL/keras/VARIATION"


@dataclasses.dataclass(frozen=True)
class PushFlags:
    """The flags of every command that can publish what it writes (and card metadata)."""

    push_to: str = flag(
        f"Publish the result: {_EXAMPLES} (credentials: HF_TOKEN or `hf auth "
        "login`; Kaggle's KAGGLE_USERNAME/KAGGLE_KEY or ~/.kaggle/kaggle.json)."
    )
    language: str = flag("Model card: language of the training text (e.g. en).")
    license: str = flag("Model card: license identifier (e.g. apache-2.0).")

    def __post_init__(self):
        self.check_push_flags()

    def check_push_flags(self) -> None:
        """The target (every repository it will derive) and the card's metadata, checked
        before any work: a refusal at push time would come after the training."""
        _ = self.push_target  # parsing is the check: a bad target raises here
        card_metadata.check(self.language, self.license)

    @property
    def push_target(self) -> Target | None:
        """`--push_to` as a `Target` (None without it): the one place a flag value is parsed."""
        return None if self.push_to is None else parse(self.push_to)


class PushTargetError(UserError):
    """A `--push_to` value that names no place a push could go; one line for the user."""


@dataclasses.dataclass(frozen=True)
class Target:
    hub: str  # HF or KAGGLE
    handle: str  # "ORG/NAME", or "OWNER/MODEL/keras/VARIATION"

    @property
    def uri(self) -> str:
        return f"{self.hub}://{self.handle}"

    @property
    def repo_id(self) -> str:
        return self.handle

    def with_suffix(self, suffix: str) -> Target:
        return dataclasses.replace(self, handle=self.handle + suffix)


def _hf(handle: str, uri: str) -> Target:
    """Every repository the export can go to is checked with the Hub library's own validator:
    the transformers folder's (`handle`) and the keras-hub preset's (`handle` + suffix)."""
    if len(handle.split("/")) != 2:
        raise PushTargetError(
            f"--push_to {uri!r}: a Hugging Face target is hf://ORG/NAME "
            "(organisation or user name, then the repository name)."
        )
    if len(handle.split("/")[1]) + len(PRESET_SUFFIX) > _HF_NAME_MAX:
        raise PushTargetError(
            f"--push_to {uri!r}: the name must leave room for the preset "
            f"repository's {PRESET_SUFFIX!r} suffix (at most "
            f"{_HF_NAME_MAX - len(PRESET_SUFFIX)} characters)."
        )
    for repo_id in (handle, handle + PRESET_SUFFIX):
        try:
            validate_repo_id(repo_id)
        except HFValidationError as err:
            # Its messages end with the id itself, unescaped (a newline would break the line).
            reason = str(err).strip().removesuffix(f": '{repo_id}'.").rstrip(".")
            what = "" if repo_id == handle else " (where the keras-hub preset would go)"
            raise PushTargetError(
                f"--push_to {uri!r}: {repo_id!r}{what} is not a valid Hub repository: {reason}."
            ) from None
    return Target(HF, handle)


def _kaggle(handle: str, uri: str) -> Target:
    parts = handle.split("/")
    if len(parts) != 4 or not all(_KAGGLE_PART.fullmatch(p) for p in parts):
        raise PushTargetError(
            f"--push_to {uri!r}: a Kaggle target is "
            "kaggle://OWNER/MODEL/keras/VARIATION (four names)."
        )
    if parts[2] != "keras":
        raise PushTargetError(
            f"--push_to {uri!r}: keras-hub presets go to the 'keras' "
            f"framework of a Kaggle model, not {parts[2]!r}."
        )
    return Target(KAGGLE, handle)


def parse(uri: str) -> Target:
    """Checks a `--push_to` value; raises PushTargetError with one line if it is not one."""
    scheme, sep, handle = uri.partition("://")
    if not sep or scheme not in (HF, KAGGLE):
        raise PushTargetError(f"--push_to {uri!r} names no hub; use {_EXAMPLES}.")
    return _hf(handle, uri) if scheme == HF else _kaggle(handle, uri)


def repos_for(target: Target, formats) -> dict[str, Target]:
    """{format: where it goes} for the export formats that go to `target` (see module doc)."""
    formats = tuple(formats)
    if target.hub == KAGGLE:
        if KERAS_HUB_FORMAT not in formats:
            raise PushTargetError(
                f"--push_to {target.uri}: Kaggle takes the keras-hub preset; "
                "export --format keras-hub or all."
            )
        return {KERAS_HUB_FORMAT: target}
    if formats == (KERAS_HUB_FORMAT,):
        return {KERAS_HUB_FORMAT: target}
    out = {f: target for f in formats if f in _REPO_ROOT_FORMATS}
    if KERAS_HUB_FORMAT in formats:
        out = {KERAS_HUB_FORMAT: target.with_suffix(PRESET_SUFFIX), **out}
    return out


def tokenizer_target(uri: str) -> Target:
    """A tokenizer push target: a Hugging Face repository (keras-hub has no Kaggle path for
    a bare `tokenizers` folder)."""
    target = parse(uri)
    if target.hub != HF:
        raise PushTargetError(
            f"--push_to {uri!r}: a tokenizer is pushed to a Hugging Face "
            "repository (hf://ORG/NAME)."
        )
    return target
