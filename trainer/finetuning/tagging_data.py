"""What a tagging fine-tune reads (`tagging_run`): the splits of --hf_dataset, and every split
aligned to word pieces as numpy arrays (a sentence a row, right-padded to the longest), or,
packed (`--packing`, families with `packed_states`), the training sentences several to a row
(`packed_rows.pack_split`) and a step of as many rows as hold --batch_size sentences on
average; dev and test stay a sentence a row, with the example ids the packed model reads.

Example:
    >>> data = prepare(source, job, packed=True, replicas=1)
    >>> data.arrays.train[0]["example_ids"].shape, data.batch_rows
"""

from __future__ import annotations

import dataclasses

import numpy as np

from common import tokenizer_files
from common.errors import UserError
from trainer.finetuning import jobs, packed_rows, protocol
from trainer.tasks import tagging, word_alignment
from trainer.tasks.tagging import IGNORED

SPLITS = ("train", "dev", "test")


def hub_splits(config) -> tuple[dict, dict]:
    """({split: TaggedSplit}, provenance) of --hf_dataset (a Hub name or a saved DatasetDict):
    its words column (`tokens`, or --text_column) and tags column (`tags`, else `ner_tags`, or
    --label_column), the splits --train_split/--dev_split/--test_split or the defaults."""
    from trainer.tasks import hub

    loaded = hub.load(config.hf_dataset, config.hf_config, config.hf_revision, hint="--train")
    asked = {"train": config.train_split, "dev": config.dev_split, "test": config.test_split}
    used = hub.choose_splits(loaded, asked)
    tokens = config.text_column if config.text_column != "text" else "tokens"
    tags = config.label_column if config.label_column != "label" else None
    splits = {
        ours: tagging.from_dataset(loaded.label(theirs), loaded.splits[theirs], tokens, tags)
        for ours, theirs in used.items()
    }
    print(loaded.said(used, {n: len(split) for n, split in splits.items()}), flush=True)
    return splits, loaded.provenance(used)


@dataclasses.dataclass
class TaggingData:
    """A job's splits aligned to pieces: features and token labels as numpy, per split."""

    tagset: tagging.TagSet
    splits: dict  # name -> tagging.TaggedSplit
    aligned: dict  # name -> word_alignment.Alignment
    # Per split (features: token_ids, padding_mask[, segment_ids]; label ids per piece,
    # IGNORED where no loss is read), as the classifier's loop holds them.
    arrays: protocol.TaskData
    counts: dict  # name -> what results.json's "data" says of it
    info: object  # the tokenizer's TokenizerInfo
    # Packed (`packed_rows.pack_split`): train's rows hold several sentences, and a step this
    # many rows (about --batch_size sentences); every split's rows carry example ids. None:
    # padded, a sentence a row, --batch_size rows a step.
    batch_rows: int | None = None

    def split(self, name: str) -> tuple:
        return getattr(self.arrays, name)


def prepare(source, job: jobs.Job, packed: bool = False, replicas: int = 1) -> TaggingData:
    """Tokenizes every split with the model's tokenizer and places the word labels; `packed`:
    the training sentences several to a row, each device's share whole rows."""
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    max_length = job.settings.max_length or min(jobs.DEFAULT_MAX_LENGTH, source.max_sequence_length)
    if max_length > source.max_sequence_length:
        positions = source.max_sequence_length
        raise UserError(f"--max_length {max_length} is more than the model's {positions} positions")
    aligner = word_alignment.WordAligner(tokenizer, info, max_length)
    tagset = job.options.tagset
    aligned = {
        name: aligner.align(split.words, tagging.encode_tags(split, tagset))
        for name, split in job.splits.items()
    }
    length = max(len(s.token_ids) for a in aligned.values() for s in a.sentences)
    arrays, counts = {}, {}
    for name, alignment in aligned.items():
        features = alignment.features(length, info.pad_id)
        labels = features.pop("labels")
        if source.family.takes_segment_ids:
            features["segment_ids"] = np.zeros_like(features["token_ids"])
        arrays[name] = (features, labels)
        split = job.splits[name]
        words = sum(len(words) for words in split.words)
        counts[name] = dict(alignment.counts(), examples=len(split), words=words, path=split.path)
        counts[name].update(skipped_empty=split.skipped_empty, max_length=max_length)
    batch_rows = None
    if packed:
        batch = job.recipe.batch_size
        arrays, batch_rows = _packed(arrays, info.pad_id, batch, replicas, max_length)
        counts["train"]["packed_rows"] = len(arrays["train"][1])
    task = protocol.TaskData(job.task_type, len(tagset.labels), *map(arrays.get, SPLITS))
    return TaggingData(tagset, job.splits, aligned, task, counts, info, batch_rows)


def _packed(arrays: dict, pad_id: int, batch_size: int, replicas: int, length: int):
    """(the splits as packed models read them: train packed into rows of `length`
    (--max_length), dev and test a sentence a row; the rows a training step takes: as many as
    hold --batch_size sentences on average)."""
    sentences = len(arrays["train"][1])
    features, labels = packed_rows.pack_split(
        *arrays["train"], pad_id, IGNORED, replicas, length=length
    )
    batch_rows = packed_rows.rows_per_step(len(labels), sentences, batch_size, replicas)
    found = {name: (packed_rows.one_per_row(f), y) for name, (f, y) in arrays.items()}
    found["train"] = (features, labels)
    return found, batch_rows
