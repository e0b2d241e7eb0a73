"""The classifiers of the model-based quality filter (beam_pipelines/model_filter.py): which
kinds are read, how a document gets its score, and what is checked before a run starts.

Two kinds, told apart by what `--quality_model` names:

- **fastText** (a `.bin` / `.ftz` file, as DCLM's and FineWeb's filters ship): the score is the
  probability the model gives `--quality_label` (`hq` or `__label__hq`), with the document's
  line breaks made spaces (fastText reads one line).
- **transformers** (a folder with config.json: a `*ForSequenceClassification`, such as the
  `hf/` folder `trainer.finetune` writes for a classification task, or FineWeb-Edu's
  classifier): the document's first `--quality_max_tokens` tokens (at most what the model
  reads: its tokenizer's `model_max_length`, else its position table less 2), batched with
  padding; the score is the softmax probability of `--quality_label` (sigmoid for a
  multi-label head), or for a one-output head (`num_labels` 1, a regression such as
  FineWeb-Edu's 0-5 scale) the output itself. Runs with torch on CPU.

`load` runs on the launcher before anything is written: the model is read once (a file that is
not a model of its kind, or a label the model lacks, is one line), its files are fingerprinted
(sha256, recorded in the manifest), and the threshold is checked against the score's range.
Workers `open_scorer` their own copy (RunInference loads it once per process).

Example:
    >>> spec = load(parse(config))              # on the launcher
    >>> score = open_scorer(spec)               # on a worker: a local copy, loaded
    >>> score(["a document", "another one"])    # -> np.ndarray of 2 scores
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import tempfile

import numpy as np

from common import flags, fs, prepared_dir
from common.errors import UserError
from common.flags import flag

KINDS = ("fasttext", "transformers")
ACTIONS = ("remove", "report")
FASTTEXT_PREFIX = "__label__"


class QualityModelError(UserError):
    """A --quality_model setting that cannot score the corpus; nothing has been written."""


@dataclasses.dataclass(frozen=True)
class QualityModelConfig:
    """The model-based quality filter's flags (each one a prepare flag)."""

    quality_model: str = flag(
        "score every clean document with a classifier and keep the best: a fastText model "
        "file (.bin/.ftz) or a transformers *ForSequenceClassification folder (trainer."
        "finetune's hf/ export); local or gs:// (beam_pipelines/model_filter.py)"
    )
    quality_label: str = flag(
        "the label whose probability is the score (fastText: with or without __label__); "
        "not needed for a one-output (regression) head"
    )
    quality_threshold: float = flag("keep documents whose score is at least this")
    quality_keep_fraction: float = flag(
        "keep this top fraction of documents by score instead (the threshold is the scores' "
        "quantile, computed over the whole run)"
    )
    quality_max_tokens: int = flag(
        "a transformers classifier reads a document's first this many tokens", 512, minimum=1
    )
    quality_batch_size: int = flag(
        "documents per classifier batch (transformers: batched by length)", 64, minimum=1
    )
    quality_action: str = flag(
        "remove: documents below the threshold are not tokenized (each one written with its "
        f"score to the {prepared_dir.LOW_QUALITY_KIND} files of the dead letters' folder); "
        "report: kept, written the same way",
        "remove",
        choices=ACTIONS,
    )


@dataclasses.dataclass(frozen=True)
class QualityModelSpec:
    """The checked flags (`parse`); once loaded on the launcher (`load`) the kind, the
    label's index and what the manifest records."""

    path: str
    label: str | None
    threshold: float | None
    keep_fraction: float | None
    max_tokens: int
    batch_size: int
    action: str
    kind: str = ""
    label_index: int = -1  # -1: the output itself (regression)
    activation: str = ""  # softmax, sigmoid or none
    record: dict = dataclasses.field(default_factory=dict, compare=False)


def parse(config: QualityModelConfig) -> QualityModelSpec | None:
    """The checked spec, or None without --quality_model (whose companion flags must then
    stay at their defaults)."""
    if not config.quality_model:
        if changed := flags.companions_changed(QualityModelConfig, config):
            raise QualityModelError(f"{', '.join(changed)}: give --quality_model too")
        return None
    threshold, fraction = config.quality_threshold, config.quality_keep_fraction
    if (threshold is None) == (fraction is None):
        raise QualityModelError(
            "--quality_model needs exactly one of --quality_threshold and --quality_keep_fraction"
        )
    if threshold is not None and not math.isfinite(threshold):
        raise QualityModelError(f"--quality_threshold {threshold} is not a finite number")
    if fraction is not None and not 0 < fraction <= 1:
        raise QualityModelError(f"--quality_keep_fraction {fraction} must be in (0, 1]")
    return QualityModelSpec(
        config.quality_model,
        config.quality_label or None,
        threshold,
        fraction,
        config.quality_max_tokens,
        config.quality_batch_size,
        config.quality_action,
    )


def kind_of(path: str) -> str:
    """ "transformers" for a folder with config.json, "fasttext" for a file; one line else."""
    if fs.exists(fs.join(path, "config.json")):
        return "transformers"
    if fs.stamp(path) is not None:
        return "fasttext"
    raise QualityModelError(
        f"--quality_model {path}: no such file, nor a folder with config.json (a fastText "
        ".bin/.ftz file or a transformers *ForSequenceClassification folder)"
    )


def model_files(path: str, kind: str) -> list[str]:
    """The files that make the model, sorted (a folder's, at any depth)."""
    return [path] if kind == "fasttext" else sorted(fs.files_under(path))


def fingerprint(path: str, kind: str) -> tuple[str, list[dict]]:
    """(sha256 over the model's files in order, [{name, bytes, sha256}] of each)."""
    whole, files = hashlib.sha256(), []
    for file in model_files(path, kind):
        digest, size = hashlib.sha256(), 0
        with fs.open_read(file) as f:
            while chunk := f.read(8 << 20):
                digest.update(chunk)
                size += len(chunk)
        name = fs.basename(file) if kind == "fasttext" else file[len(path) :].lstrip("/")
        files.append({"name": name, "bytes": size, "sha256": digest.hexdigest()})
        whole.update(f"{name}\0{digest.hexdigest()}\n".encode())
    return whole.hexdigest(), files


def local_model(path: str, kind: str, folder: str) -> str:
    """`path` itself when local, else a copy inside `folder` (streamed: fastText files of
    several GB), its folder layout kept."""
    if not fs.is_remote(path):
        return path
    for file in model_files(path, kind):
        relative = fs.basename(file) if kind == "fasttext" else file[len(path) :].lstrip("/")
        target = os.path.join(folder, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with fs.open_read(file) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
    return os.path.join(folder, fs.basename(path)) if kind == "fasttext" else folder


def _fasttext_labels(path: str) -> list[str]:
    try:
        import fasttext
    except ImportError as err:  # the base install carries it; a trimmed one may not
        raise QualityModelError(
            f"--quality_model {path}: fastText is not installed ({err})"
        ) from None
    try:
        return list(fasttext.load_model(path).get_labels())
    except (ValueError, RuntimeError, MemoryError) as err:
        raise QualityModelError(
            f"--quality_model {path} cannot be read as a fastText model: {err}"
        ) from None


def _transformers_head(path: str) -> tuple[list[str], str]:
    """(the label names in output order, the activation) from a folder's config.json."""
    try:
        config = json.loads(fs.read_bytes(fs.join(path, "config.json")))
        names = config.get("id2label") or {}
        count = int(config.get("num_labels") or len(names) or 2)
        labels = [str(names.get(str(i), names.get(i, f"LABEL_{i}"))) for i in range(count)]
    except (ValueError, TypeError, AttributeError) as err:
        raise QualityModelError(f"--quality_model {path}: unreadable config.json ({err})") from None
    if not any(a.endswith("ForSequenceClassification") for a in config.get("architectures") or []):
        raise QualityModelError(
            f"--quality_model {path}: config.json names {config.get('architectures')}, not a "
            "*ForSequenceClassification"
        )
    if count == 1:
        return labels, "none"
    multi = config.get("problem_type") == "multi_label_classification"
    return labels, "sigmoid" if multi else "softmax"


def _model_tokens(path: str) -> int | None:
    """The most tokens a transformers folder reads: its tokenizer's `model_max_length`, else
    its position table less 2 (a RoBERTa table starts after the padding id; other families
    give up 2 tokens); None when neither says."""

    def read(name: str) -> dict:
        file = fs.join(path, name)
        return json.loads(fs.read_bytes(file)) if fs.exists(file) else {}

    length = read("tokenizer_config.json").get("model_max_length")
    if isinstance(length, int) and 0 < length < 1_000_000:
        return length
    positions = read("config.json").get("max_position_embeddings")
    return positions - 2 if isinstance(positions, int) and positions > 2 else None


def _label_index(spec: QualityModelSpec, labels: list[str], kind: str) -> int:
    """The index of --quality_label among `labels` (-1: a one-output head's own value)."""
    if kind == "transformers" and len(labels) == 1:
        if spec.label not in (None, labels[0]):
            raise QualityModelError(
                f"--quality_label {spec.label}: {spec.path} has one output ({labels[0]}), "
                "its value is the score; leave --quality_label out"
            )
        return -1
    shown = [label.removeprefix(FASTTEXT_PREFIX) for label in labels]
    if spec.label is None:
        raise QualityModelError(
            f"--quality_model {spec.path} has labels {shown}: name the one to keep with "
            "--quality_label"
        )
    wanted = spec.label.removeprefix(FASTTEXT_PREFIX) if kind == "fasttext" else spec.label
    names = shown if kind == "fasttext" else labels
    if wanted not in names:
        raise QualityModelError(
            f"--quality_label {spec.label} is not a label of {spec.path}; its labels: {shown}"
        )
    return names.index(wanted)


def load(spec: QualityModelSpec) -> QualityModelSpec:
    """On the launcher, before anything is written: the model read (kind, labels), the
    threshold checked against the score's range, the files fingerprinted; the spec with
    the manifest's record of the model."""
    kind = kind_of(spec.path)
    with tempfile.TemporaryDirectory(prefix="quality-model-") as folder:
        if kind == "fasttext":
            labels, activation = _fasttext_labels(local_model(spec.path, kind, folder)), "softmax"
        else:
            labels, activation = _transformers_head(spec.path)
    index = _label_index(spec, labels, kind)
    # A document is cut at what the model can read: more positions than its table is an
    # index error deep inside transformers on a worker.
    max_tokens = min(spec.max_tokens, _model_tokens(spec.path) or spec.max_tokens)
    if index >= 0 and spec.threshold is not None and not 0 <= spec.threshold <= 1:
        raise QualityModelError(
            f"--quality_threshold {spec.threshold}: the score is a probability, in [0, 1]"
        )
    sha256, files = fingerprint(spec.path, kind)
    label = labels[index] if index >= 0 else None
    record = {
        "kind": kind,
        "path": spec.path,
        "sha256": sha256,
        "files": files,
        "labels": labels,
        "score": f"probability of {label} ({activation})" if label else "the model's one output",
        "threshold": spec.threshold,
        "keep_fraction": spec.keep_fraction,
        "action": spec.action,
        "max_tokens": max_tokens if kind == "transformers" else None,
    }
    return dataclasses.replace(
        spec,
        kind=kind,
        label_index=index,
        activation=activation,
        max_tokens=max_tokens,
        record=record,
    )


def loaded(settings):
    """`settings` (`options.Settings`) with its quality model read and fingerprinted
    (`load`); as it is without --quality_model."""
    if settings.quality_model is None:
        return settings
    return dataclasses.replace(settings, quality_model=load(settings.quality_model))


class FastTextScorer:
    """Texts -> the probability of one label, by a fastText model."""

    def __init__(self, path: str, label_index: int):
        import fasttext

        self.model = fasttext.load_model(path)
        self.label = self.model.get_labels()[label_index]

    def __call__(self, texts: list[str]) -> np.ndarray:
        lines = [" ".join(text.split()) for text in texts]  # one line each, as fastText reads
        labels, probs = self.model.predict(lines, k=-1, threshold=0.0)
        return np.array(
            [dict(zip(names, p)).get(self.label, 0.0) for names, p in zip(labels, probs)],
            dtype=np.float64,
        )


class TransformersScorer:
    """Texts -> a sequence classifier's score (see the module docstring), torch on CPU."""

    def __init__(self, folder: str, label_index: int, activation: str, max_tokens: int):
        import torch
        import transformers

        self.torch = torch
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        self.model = transformers.AutoModelForSequenceClassification.from_pretrained(folder)
        self.model.eval()
        self.index, self.activation, self.max_tokens = label_index, activation, max_tokens

    def __call__(self, texts: list[str]) -> np.ndarray:
        batch = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_tokens,
            return_tensors="pt",
        )
        with self.torch.inference_mode():
            logits = self.model(**batch).logits.float()
        if self.index < 0:
            return logits[:, 0].double().numpy()
        if self.activation == "sigmoid":
            probs = self.torch.sigmoid(logits)
        else:
            probs = self.torch.softmax(logits, dim=-1)
        return probs[:, self.index].double().numpy()


def open_scorer(spec: QualityModelSpec, folder: str):
    """The loaded spec's scorer (a local copy of a remote model made inside `folder`)."""
    local = local_model(spec.path, spec.kind, folder)
    if spec.kind == "fasttext":
        return FastTextScorer(local, spec.label_index)
    return TransformersScorer(local, spec.label_index, spec.activation, spec.max_tokens)
