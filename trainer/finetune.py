"""Fine-tunes a pretrained model on a labelled task and scores it: does pretraining pay off?

    python -m trainer.finetune --model runs/tiny --train train.jsonl --dev dev.jsonl \
        --output_dir finetune/tiny

`--model` is anything `trainer.model_source.resolve` accepts (a run folder: its newest
checkpoint; one `.weights.h5`; our keras-hub export). The family's keras-hub TextClassifier
is built on its backbone (`--from_scratch`: on random weights, the reference), texts are
tokenized with the model's own tokenizer files and packed the family's way
(`trainer/finetuning/packing.py`), and each of `--seeds` fine-tunes, keeps its best epoch on
dev and scores test (`trainer/finetuning/protocol.py`). The table is printed and
`{output_dir}/results.json` written; docs/finetuning.md states the protocol and the recipe.

Example:
    >>> main(["--model", "runs/tiny", "--train", "t.csv", "--dev", "d.csv",
    ...       "--text_column", "sentence", "--output_dir", "out", "--seeds", "1"])
    0
"""

from __future__ import annotations

import dataclasses
import sys

from common import flags, fs, tokenizer_files
from common.errors import UserError, run_cli
from common.flags import flag
from trainer import families, keras_backend, model_source, run_dir
from trainer.finetuning import datasets, metrics, packing, pretraining, protocol, results

DEFAULT_MAX_LENGTH = 128  # cramming's GLUE length
ALL_METRICS = (*metrics.CLASSIFICATION, *metrics.REGRESSION)


@dataclasses.dataclass
class FinetuneFlags:
    model: str = flag("The pretrained model: a training run folder (newest checkpoint), a "
                      ".weights.h5 checkpoint or our keras-hub export.", required=True)
    train: str = flag("Training examples: a .jsonl, .csv or .tsv file, or a Hugging Face "
                      "save_to_disk folder of one split.", required=True)
    dev: str = flag("Development examples (selection of the best epoch).", required=True)
    test: str = flag("Test examples, scored once with the selected epoch's weights.")
    output_dir: str = flag("Where results.json and the TensorBoard logs go.", required=True)
    input_format: str = flag("File format; default: hf for a folder, else by extension.",
                             choices=datasets.FORMATS)
    text_column: str = flag("The column of the (first) text.", "text")
    text_pair_column: str = flag("The column of the second text (a text-pair task).")
    label_column: str = flag("The column of the label.", "label")
    task_type: str = flag("classification (labels named in train) or regression (a number).",
                          "classification", choices=datasets.TASK_TYPES)
    metric: str = flag("The dev score that selects the best epoch; default accuracy for "
                       "classification, spearman for regression.", choices=ALL_METRICS)
    max_length: int = flag("Tokens per example, special tokens included; longer ones are "
                           "truncated and counted. Default: 128, or the model's positions "
                           "if fewer.", minimum=8)
    epochs: int = flag("Epochs per seed.", 5, minimum=1)
    batch_size: int = flag("Examples per step.", 16, minimum=1)
    learning_rate: float = flag("Peak learning rate (a tiny model needs more, e.g. 1e-3).",
                                4e-5, minimum=0.0)
    warmup_ratio: float = flag("Share of the steps spent warming up linearly.", 0.1,
                               minimum=0.0, maximum=1.0)
    weight_decay: float = flag("AdamW weight decay (not on biases and LayerNorm).", 0.01,
                               minimum=0.0)
    seeds: str = flag("Comma-separated seeds, one fine-tuning each.", "1,2,3")
    from_scratch: bool = flag("Same architecture, random weights: the reference that shows "
                              "what pretraining bought.", False)
    jit_compile: str = flag("XLA-compile the step: auto = yes on JAX and on accelerators, "
                            "no for TensorFlow on a CPU (the compile outlasts a short "
                            "fine-tune).", "auto", choices=("auto", "true", "false"))
    backend: str = flag("Keras backend; default KERAS_BACKEND, else tensorflow.",
                        choices=keras_backend.BACKENDS)

    def __post_init__(self):
        problem = flags.out_of_bounds(FinetuneFlags, self)
        if problem:
            raise ValueError(problem)
        self.seed_list()  # raises for a malformed list
        self.metric = self.metric or ("spearman" if self.task_type == "regression"
                                      else "accuracy")
        wanted = metrics.REGRESSION if self.task_type == "regression" else \
            metrics.CLASSIFICATION
        if self.metric not in wanted:
            raise ValueError(f"--metric {self.metric} does not score a {self.task_type} task "
                             f"(choose one of {', '.join(wanted)})")

    def seed_list(self) -> list[int]:
        try:
            seeds = [int(s) for s in self.seeds.split(",") if s.strip()]
        except ValueError:
            raise ValueError(f"--seeds must be comma-separated integers, not "
                             f"{self.seeds!r}") from None
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"--seeds must name at least one seed, each once: {self.seeds!r}")
        return seeds

    def spec(self) -> datasets.TaskSpec:
        return datasets.TaskSpec(self.task_type, self.text_column, self.text_pair_column,
                                 self.label_column)


def read_task(config: FinetuneFlags) -> tuple[dict, tuple | None, dict]:
    """({split: Split}, label names or None, {split: targets}), before any model is loaded,
    so that bad data fails fast."""
    spec = config.spec()
    paths = {"train": config.train, "dev": config.dev, "test": config.test}
    splits = {name: datasets.read_split(path, spec, config.input_format)
              for name, path in paths.items() if path}
    names = None if config.task_type == "regression" else datasets.label_names(splits["train"])
    if names is not None and config.metric == "f1" and len(names) != 2:
        raise UserError(f"--metric f1 is the binary F1, but {config.train} has {len(names)} "
                        "labels; use macro_f1")
    targets = {name: datasets.encode_labels(split, spec, names)
               for name, split in splits.items()}
    return splits, names, targets


def pack_task(config, source, splits: dict, names, targets: dict):
    """(TaskData: the splits tokenized and packed as numpy, per split its counts, the
    tokenizer's ids)."""
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    max_length = config.max_length or min(DEFAULT_MAX_LENGTH, source.max_sequence_length)
    if max_length > source.max_sequence_length:
        raise UserError(f"--max_length {max_length} is more than the model's "
                        f"{source.max_sequence_length} positions")
    packer = packing.Packer(tokenizer, info, source.family, max_length)
    packed = {name: packer.pack(split.texts, split.pairs) for name, split in splits.items()}
    length = max(len(row) for p in packed.values() for row in p.rows)
    segments = families.get(source.family).takes_segment_ids
    arrays = {name: (p.features(length, info.pad_id, segments), targets[name])
              for name, p in packed.items()}
    outputs = 1 if names is None else len(names)
    data = protocol.TaskData(config.task_type, outputs, arrays["train"], arrays["dev"],
                             arrays.get("test"))
    counts = {name: {"examples": len(split), "skipped_empty": split.skipped_empty,
                     "truncated": packed[name].truncated, "path": split.path,
                     "max_length": max_length} for name, split in splits.items()}
    return data, counts, info


def resolve_model(path: str):
    source = model_source.resolve(path)
    if source.tokenizer_dir is None:
        raise model_source.ModelNotFoundError(
            f"{path} has no {run_dir.TOKENIZER_DIR}/ folder: cannot tokenize the text")
    return source


def finetune(config: FinetuneFlags) -> dict:
    """Runs the whole protocol; returns the results document (also written and printed)."""
    from trainer.finetuning.classifier import PretrainedBackbone, jit_default

    source = resolve_model(config.model)
    splits, names, targets = read_task(config)
    data, counts, info = pack_task(config, source, splits, names, targets)
    backbone = PretrainedBackbone(source, config.from_scratch)
    backbone.check_tokenizer(info)
    pretrained = pretraining.pretraining_facts(source)  # before training: fails fast
    if pretrained["warning"] and not config.from_scratch:
        print(f"warning: {pretrained['warning']}", flush=True)
    # A results.json left by an earlier run must not pass for this one's if this one dies.
    results.remove_stale(config.output_dir)
    recipe = protocol.Recipe(config.epochs, config.batch_size, config.learning_rate,
                             config.warmup_ratio, config.weight_decay, config.metric)
    models = protocol.SeedModels(backbone, data, recipe, jit_default(config.jit_compile))
    scalars = results.Scalars(config.output_dir)
    records = []
    for seed in config.seed_list():
        record = protocol.run_seed(models, seed, scalars)
        print(f"seed {seed}: best epoch {record['best_epoch']}, dev {config.metric} "
              f"{record['dev'][config.metric]:.4f} ({record['seconds']:.1f} s)", flush=True)
        records.append(record)
    constant = protocol.constant_scores(data)
    summary = protocol.summarise(records, config.metric, constant)
    document = _document(config, source, backbone, names, counts)
    document["pretraining"] = pretrained
    document["scores"] = {"metric": config.metric, "seeds": records, "summary": summary,
                          "constant_answer_dev": constant}
    results.write(config.output_dir, document)
    return document


def _document(config, source, backbone, names, counts) -> dict:
    import keras

    return {
        "protocol": {**dataclasses.asdict(config), "seeds": config.seed_list(),
                     "max_length": counts["train"]["max_length"],
                     "backend": keras.backend.backend(), "recipe_source": results.RECIPE_SOURCE,
                     "selection": "best epoch on dev by the metric", "notes":
                     results.PROTOCOL_NOTES, "optimizer": "AdamW beta (0.9, 0.98), eps 1e-6, "
                     "global norm clip 1.0, linear warmup then linear decay to 0"},
        "model": {"path": config.model, "kind": source.kind, "checkpoint": source.path,
                  "family": source.family, "from_scratch": config.from_scratch,
                  "backbone_parameters": backbone.parameters},
        "task": {"type": config.task_type, "labels": list(names) if names else None,
                 "pair": bool(config.text_pair_column)},
        "data": counts,
    }


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    config = flags.parse(parser, FinetuneFlags, argv)

    def body():
        if config.backend is None:  # else the flag chose it
            keras_backend.check()
        document = finetune(config)
        print(results.table(document))
        print(f"results: {fs.join(config.output_dir, results.RESULTS)}")
    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
