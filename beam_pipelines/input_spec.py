"""What to read, as flags shared by `prepare` and `train_tokenizer` (one definition).

Example:
    >>> spec = InputSpec(input="corpus/*.jsonl.gz", text_field="body")
    >>> spec.hf_split_list
    ['train']
"""

from __future__ import annotations

import dataclasses

from beam_pipelines import sources
from common.flags import flag


@dataclasses.dataclass
class InputSpec:
    input: str = flag("comma-separated paths or globs (local or gs://) of "
                      ".txt/.jsonl/.parquet, optionally compressed")
    text_field: str = flag("JSONL field / parquet column with the text", "text")
    txt_unit: str = flag(".txt documents: one per line (as the HF example) or per blank-line "
                         "paragraph", "line", choices=("line", "paragraph"))
    hf_dataset: str = flag("Hugging Face dataset name, or a folder written by save_to_disk")
    hf_config: str = flag("configuration of --hf_dataset")
    hf_splits: str = flag("comma-separated dataset splits, e.g. 'train,validation'", "train",
                          aliases=["--hf_split"])
    max_document_bytes: int = flag("longer documents are dead-lettered",
                                   sources.DEFAULT_MAX_DOCUMENT_BYTES)

    @property
    def hf_split_list(self) -> list[str]:
        return [s for s in self.hf_splits.split(",") if s]
