"""The short card (README.md) of a tokenizer folder, built with `huggingface_hub.ModelCard`
from what `train_tokenizer` recorded (its `training_info.json` summary).

Example:
    >>> card = build(info, "my-org/tok")
    >>> card.data.library_name
    'tokenizers'
"""

from __future__ import annotations

from huggingface_hub import ModelCard, ModelCardData

from common import fs

README = "README.md"


def _rows(info: dict) -> str:
    config = info["config"]
    sample = (
        f"a uniform sample of {info['documents_used']:,} of the {info['documents_read']:,}"
        f" documents read"
        if config.get("max_documents")
        else f"all {info['documents_read']:,} documents read"
    )
    rows = [
        ("model", config["model"]),
        ("vocabulary", f"{info['vocab_size']:,}"),
        ("trained on", sample),
        ("characters read", f"{info['chars_read']:,}"),
        ("records rejected (unreadable)", f"{info['documents_rejected']:,}"),
        ("model_max_length", config["model_max_length"]),
        ("sha256 of tokenizer.json", f"`{info['fingerprint']}`"),
    ]
    return "\n".join(["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows])


def build(info: dict, repo_id: str | None = None) -> ModelCard:
    """The card of a tokenizer trained by `beam_pipelines.train_tokenizer`."""
    model = info["config"]["model"]
    data = ModelCardData(library_name="tokenizers", tags=["tokenizer", model])
    where = repo_id or "PATH/TO/tokenizer"
    body = (
        f"# {model} tokenizer\n\nA `tokenizers` {model} tokenizer for masked-LM "
        f"pretraining, trained with mlm_pretrain's `beam_pipelines.train_tokenizer`.\n\n"
        f"{_rows(info)}\n\n## How to use\n\n```python\n"
        f"from transformers import AutoTokenizer\n\n"
        f'tokenizer = AutoTokenizer.from_pretrained("{where}")\n```\n'
    )
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def write(card: ModelCard, folder: str) -> None:
    fs.write_bytes(fs.join(folder, README), str(card).encode("utf-8"))
