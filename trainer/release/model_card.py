"""The model card (README.md) of an export, built with the Hub's own library.

The metadata is `huggingface_hub.ModelCardData` (library, pipeline tag: `fill-mask`, or
`sentence-similarity` for the sentence-transformers export; language,
license, tags, and the `model-index` results block: eval loss, masked accuracy, perplexity,
ratio to the unigram baseline); the text says what a reader needs: architecture and size,
tokenizer, training data as the prepare manifest records it, recipe, results and how to load
the model in transformers and keras-hub. Every figure comes from `trainer.release.card_facts`.
`trainer.export` writes one into each format's folder, with or without a push.

Example:
    >>> card = build(facts, "hf", CardOptions(language="en", license="apache-2.0"))
    >>> card.data.pipeline_tag
    'fill-mask'
"""

from __future__ import annotations

import dataclasses
import re

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from common import fs
from trainer.release import card_text

README = "README.md"
LIBRARY = {
    "keras-hub": "keras-hub",
    "hf": "transformers",
    "sentence-transformers": "sentence-transformers",
}
# What the Hub lists the model under, and tags beside the library's (as sentence-transformers'
# own cards tag an embedding model).
PIPELINE = {"sentence-transformers": "sentence-similarity"}
EXTRA_TAGS = {"sentence-transformers": ["sentence-similarity", "feature-extraction"]}
MASK_TOKEN_ROLE = "mask_token"


@dataclasses.dataclass(frozen=True)
class CardOptions:
    """What the run's files cannot say: the card's language and license, where each format
    is published (`{format: "hf://ORG/NAME"}`, for the loading instructions) and the
    sentence-transformers export's pooling (`cls` or `mean`)."""

    language: str | None = None
    license: str | None = None
    published: dict = dataclasses.field(default_factory=dict)
    pooling: str = "mean"


def model_name(facts) -> str:
    """`roberta-base-mlm`; a run continued from a model (--init_from) is named after that
    model: `roberta-from-roberta-base-mlm`."""
    record = facts.record
    initial = record.init_from
    if isinstance(initial, dict) and initial.get("path"):
        return f"{record.family.name}-from-{source_slug(initial['path'])}-mlm"
    return f"{record.family.name}-{record.size}-mlm"


def source_slug(path: str) -> str:
    """A model name's part for the model a run started from (a Hub id, a keras-hub preset,
    a run folder, a checkpoint file): its own name, lowercase, in letters, digits, dots and
    dashes. A checkpoint file inside a run's `checkpoints/` is named after its run, an
    export's hf/ or keras-hub/ folder after the export."""
    parts = [p for p in re.split(r"[/\\]+", path.rstrip("/")) if p and not p.endswith(":")]
    name = parts[-1] if parts else "model"
    if re.fullmatch(r"\d+", name) and len(parts) > 1:  # a kaggle handle's version
        name = parts[-2]
    if name.endswith(".h5") and len(parts) > 2 and parts[-2] == "checkpoints":
        name = parts[-3]
    if name in ("hf", "keras-hub") and len(parts) > 1:  # one format's folder of an export
        name = parts[-2]
    name = re.sub(r"(\.weights)?\.h5$", "", name)
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-.") or "model"


def _eval_results(facts) -> list[EvalResult] | None:
    if not facts.results:
        return None
    digest = (facts.train_data or {}).get("digest") or facts.record.train_data_digest
    common = dict(
        task_type="fill-mask",
        task_name="Masked language modeling",
        dataset_type="custom",
        dataset_name="held-out split of the pretraining data",
        dataset_split="validation",
        dataset_revision=(digest or "")[:12] or None,
    )
    values = [
        ("loss", "eval loss", facts.results["eval_loss"]),
        ("accuracy", "masked accuracy", facts.results["eval_accuracy"]),
        ("perplexity", "perplexity", facts.results["eval_perplexity"]),
    ]
    if facts.baseline_ratio is not None:
        values.append(
            ("unigram_baseline_ratio", "masked accuracy / unigram baseline", facts.baseline_ratio)
        )
    return [
        EvalResult(metric_type=kind, metric_name=label, metric_value=round(float(v), 4), **common)
        for kind, label, v in values
    ]


def card_data(facts, fmt: str, options: CardOptions) -> ModelCardData:
    name = model_name(facts)
    record = facts.record
    tags = [
        "masked-lm",
        record.family.name,
        LIBRARY[fmt],
        f"masking-{record.masking}",
        "pretrained-from-scratch",
        *EXTRA_TAGS.get(fmt, []),
    ]
    return ModelCardData(
        language=options.language,
        license=options.license,
        library_name=LIBRARY[fmt],
        pipeline_tag=PIPELINE.get(fmt, "fill-mask"),
        tags=tags,
        model_name=name,
        eval_results=_eval_results(facts),
    )


def build(facts, fmt: str, options: CardOptions) -> ModelCard:
    """The card of format `fmt` ("keras-hub", "hf" or "sentence-transformers"); `str(card)`
    is the README.md."""
    data = card_data(facts, fmt, options)
    body = card_text.body(facts, fmt, options, model_name(facts))
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def write(card: ModelCard, folder: str) -> str:
    """Writes `folder/README.md` (local or gs://) whole; returns its path."""
    path = fs.join(folder, README)
    fs.write_bytes(path, str(card).encode("utf-8"))
    return path
