"""Trains a Hugging Face `tokenizers` tokenizer for masked-LM pretraining.

    python -m beam_pipelines.train_tokenizer --input 'corpus/*.jsonl.gz' --text_field text \\
        --output_dir gs://bucket/tokenizer --vocab_size 25000 --model unigram

The output folder loads with `tokenizers.Tokenizer.from_file(dir + "/tokenizer.json")` and
with `transformers.AutoTokenizer.from_pretrained(dir)` (transformers 4.x and 5), and carries a
short card (README.md); `--push_to hf://ORG/NAME` publishes it to a Hub repository.
Training runs on one machine; `--max_documents` bounds its time and memory by a uniform
reservoir sample, and reading stops after `--max_read_documents` (10x the sample by default)
taken from the files in a seeded random order, so a huge corpus is neither held nor read whole.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import sys
import time
from collections.abc import Iterable, Iterator

from beam_pipelines import (
    hf_datasets,
    input_spec,
    progress,
    sources,
    tokenizer_card,
    tokenizer_models,
)
from beam_pipelines.input_spec import InputSpec
from common import flags, folder_swap, fs, hf_push, publish, tokenizer_files
from common.errors import UserError, run_cli
from common.flags import flag

DEAD_LETTER = "dead_letter.jsonl"


@dataclasses.dataclass
class TokenizerConfig(InputSpec):
    """Where the tokenizer goes and how it is trained; what to read is `InputSpec`."""

    output_dir: str = flag(
        "folder (local or gs://) for tokenizer.json and its configs", required=True
    )
    vocab_size: int = flag("vocabulary size", 25000)
    model: str = flag("tokenizer model", "unigram", choices=tokenizer_models.MODELS)
    # The time budget: unigram at 25k trains at ~200 documents (~200 KB) a second on one
    # core (24,368 docstrings, 24 MB: 118 s), so 100k documents take ~8 minutes.
    max_documents: int = flag(
        "train on a uniform sample of this many documents (0 = every document)", 100_000, minimum=0
    )
    max_read_documents: int = flag(
        "stop reading after this many documents (default 10x --max_documents; 0 = no limit)",
        minimum=0,
    )
    min_frequency: int = flag("minimum pair frequency (bpe, wordpiece)", 2, minimum=1)
    model_max_length: int = flag("model_max_length written to tokenizer_config.json", 512)
    seed: int = flag("seed of the sample and of the reading order", 0, minimum=0)
    progress_seconds: float = flag(
        "seconds between progress lines while reading (0 = none)", 10.0, minimum=0
    )
    push_to: str = flag(
        "publish the tokenizer folder to hf://ORG/NAME (credentials: HF_TOKEN or `hf auth login`)"
    )

    def __post_init__(self):
        if self.max_documents == 0:
            self.max_documents = None  # 0 = use every document


class InputReport:
    """Counts what was read and reports every bad record by file and line."""

    def __init__(self, progress_seconds: float = 10.0):
        self.documents = self.chars = self.rejected = 0
        self.dead_letters: list[sources.DeadLetter] = []
        self.progress_seconds = progress_seconds
        self._start = self._last_print = time.monotonic()

    def documents_of(self, records: Iterable[sources.Record]) -> Iterator[str]:
        for record in records:
            if isinstance(record, sources.DeadLetter):
                self.rejected += record.documents
                self.dead_letters.append(record)
                if len(self.dead_letters) <= 20:
                    print(
                        f"skipped {record.source}:{record.line}: {record.reason}", file=sys.stderr
                    )
                continue
            self.documents += 1
            self.chars += len(record.text)
            now = time.monotonic()
            if self.progress_seconds and now - self._last_print >= self.progress_seconds:
                self._last_print = now
                print(
                    progress.line(
                        {"documents": self.documents, "chars": self.chars},
                        now - self._start,
                        "reading",
                        "chars",
                    ),
                    flush=True,
                )
            if record.text.strip():
                yield record.text


def read_corpus(config: TokenizerConfig) -> Iterator[sources.Record]:
    """Every record of the input. When sampling, files, byte ranges of large files (or
    dataset shards) come in a seeded random order, so stopping after `read_budget`
    documents still samples the whole corpus."""
    shuffle = random.Random(config.seed).shuffle if config.max_documents else (lambda x: x)
    if config.hf_dataset:
        shards = [
            (split, index, n)
            for split in config.hf_split_list
            for n in [hf_datasets.hf_num_shards(config.hf_dataset, config.hf_config, split)]
            for index in range(n)
        ]
        shuffle(shards)
        for split, index, num_shards in shards:
            yield from hf_datasets.read_hf_shard(
                config.hf_dataset,
                config.hf_config,
                split,
                config.text_field,
                index,
                num_shards,
                config.max_document_bytes,
            )
        return
    # Large uncompressed files come as 64 MB byte ranges, so sampling reaches all of them.
    pieces = [
        (path, start, end)
        for path, stamp in input_spec.expand_inputs(config.input).items()
        for start, end in input_spec.byte_ranges(path, stamp.size, config.txt_unit)
    ]
    shuffle(pieces)
    for path, start, end in pieces:
        yield from sources.read_file(
            path, config.text_field, config.max_document_bytes, config.txt_unit, start, end
        )


def read_budget(config: TokenizerConfig) -> int | None:
    """How many documents to read at most: `--max_read_documents`, by default 10x the
    sample, so a 100 GB corpus is not read in full on one machine (0 = read everything)."""
    if config.max_read_documents is not None:
        return config.max_read_documents or None
    return 10 * config.max_documents if config.max_documents else None


def reservoir_sample(texts: Iterable[str], size: int, seed: int) -> list[str]:
    """A uniform sample of `size` texts in one pass, holding only the sample (Algorithm R)."""
    rng, sample = random.Random(seed), []
    for i, text in enumerate(texts):
        if i < size:
            sample.append(text)
        elif (j := rng.randrange(i + 1)) < size:
            sample[j] = text
    return sample


def check(config: TokenizerConfig) -> None:
    """One clear sentence for a flag that cannot work, before anything is read or written."""
    if not config.input and not config.hf_dataset:
        raise UserError("give --input (files) or --hf_dataset")
    if config.hf_dataset:
        input_spec.hf_split_list(config.hf_splits)  # a split named twice: refused here
    if config.push_to:
        hf_push.check_token(publish.tokenizer_target(config.push_to))
    if problem := flags.out_of_bounds(TokenizerConfig, config):  # bounds on the fields
        raise UserError(problem)
    specials = len(set(tokenizer_files.SPECIAL_TOKENS[config.model].values()))
    for name in ("vocab_size", "model_max_length"):  # room beyond the special tokens
        if getattr(config, name) <= specials:
            raise UserError(
                f"--{name} must be at least {specials + 1} (got {getattr(config, name)})"
            )


def train(config: TokenizerConfig) -> dict:
    """Trains, saves and returns a summary of the run (also written as training_info.json).

    The output folder is written whole or not at all (`folder_swap.whole_folder`): a full disk or a
    kill leaves the previous tokenizer there, never a new tokenizer.json beside an old
    config; a folder that holds anything but an earlier tokenizer is refused up front."""
    check(config)
    with folder_swap.whole_folder(
        config.output_dir, markers=(tokenizer_files.TOKENIZER_JSON,)
    ) as stage:
        return _train_into(config, stage)


def _train_into(config: TokenizerConfig, folder: str) -> dict:
    """`train`, its files written into `folder`."""
    start = time.monotonic()
    tokenizer, trainer = tokenizer_models.build(
        config.model, config.vocab_size, config.min_frequency
    )
    report = InputReport(config.progress_seconds)
    texts = report.documents_of(read_corpus(config))
    budget = read_budget(config)
    if budget:
        texts = itertools.islice(texts, budget)
    texts, left_out = _sampled(texts, config, tokenizer, report)
    _train_on(tokenizer, trainer, texts, config)
    if tokenizer.get_vocab_size() == 0 or report.documents == 0:
        raise UserError("no usable document was read: nothing to train on")
    tokenizer = tokenizer_models.canonical_ids(tokenizer, config.model)
    tokenizer_files.add_post_processor(tokenizer, config.model)
    special = tokenizer_files.SPECIAL_TOKENS[config.model]
    fingerprint = tokenizer_files.save(tokenizer, folder, special, config.model_max_length)
    info = {
        "config": dataclasses.asdict(config),
        "fingerprint": fingerprint,
        "vocab_size": tokenizer.get_vocab_size(),
        "documents_read": report.documents,
        "documents_used": len(texts) if config.max_documents else report.documents,
        "chars_read": report.chars,
        "documents_rejected": report.rejected,
        "read_budget": read_budget(config),
        "characters_left_out": left_out,
        "seconds": round(time.monotonic() - start, 1),
    }
    fs.write_json(fs.join(folder, "training_info.json"), info)
    repo_id = config.push_to and publish.tokenizer_target(config.push_to).repo_id
    tokenizer_card.write(tokenizer_card.build(info, repo_id), folder)
    if report.dead_letters:
        fs.write_bytes(
            fs.join(folder, DEAD_LETTER),
            "".join(d.to_json() + "\n" for d in report.dead_letters).encode(),
        )
    return info


def _sampled(texts, config: TokenizerConfig, tokenizer, report) -> tuple:
    """(texts, characters left out): with --max_documents, a reservoir sample whose rarest
    characters are left out where the vocabulary could not hold them all."""
    left_out = 0
    if not config.max_documents:
        return texts, left_out
    texts = reservoir_sample(texts, config.max_documents, config.seed)
    print(
        f"sampled {len(texts):,} of {report.documents:,} documents; training "
        f"{config.model} (vocab {config.vocab_size})",
        flush=True,
    )
    if limit := tokenizer_models.alphabet_limit(config.model, config.vocab_size):
        texts, left_out = tokenizer_models.keep_common_characters(texts, tokenizer, limit)
    if left_out:
        print(
            f"{left_out:,} rare characters left out of the vocabulary (it keeps the "
            f"{limit:,} most frequent); they encode as the unknown token",
            flush=True,
        )
    return texts, left_out


def _train_on(tokenizer, trainer, texts, config: TokenizerConfig) -> None:
    try:
        tokenizer.train_from_iterator(texts, trainer=trainer)
    except Exception as err:  # tokenizers raises a bare Exception
        if "contain all chars" not in str(err):
            raise
        raise UserError(
            f"--vocab_size {config.vocab_size} cannot hold every character of the "
            "corpus; sample it (--max_documents, which leaves out the rarest "
            "characters) or raise --vocab_size"
        ) from None


def parse_args(argv=None) -> TokenizerConfig:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    return flags.parse(parser, TokenizerConfig, argv)


def main(argv=None) -> int:
    config = parse_args(argv)

    def body():
        info = train(config)
        print(json.dumps({k: v for k, v in info.items() if k != "config"}, indent=2))
        print(f"tokenizer written to {config.output_dir}")
        if config.push_to:
            # Dead letters quote the corpus's bad records: they stay with the user.
            url = hf_push.push_folder(
                config.output_dir,
                publish.tokenizer_target(config.push_to),
                "Upload tokenizer",
                ignore=(DEAD_LETTER,),
            )
            print(f"tokenizer pushed to {url}")

    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
