"""The tasks of a fine-tuning command: each read whole and checked before any model loads
(`read_task`: the user's files or a Hugging Face dataset; `glue_jobs`: GLUE's tasks), then
tokenized and packed with the model's own tokenizer (`pack_task`)."""

from __future__ import annotations

import dataclasses
import os

from common import fs, tokenizer_files
from common.errors import UserError
from trainer import families
from trainer.finetuning import datasets, glue, packing, protocol, recipes, results, task_kinds

DEFAULT_MAX_LENGTH = 128  # cramming's GLUE length


@dataclasses.dataclass
class Job:
    """One task to fine-tune: its splits read, labels, recipe, seeds and where results go."""

    name: str
    task_type: str
    splits: dict
    names: tuple | None
    recipe: protocol.Recipe
    seeds: list
    output_dir: str
    recipe_source: str | None = None  # None: cramming's (results.RECIPE_SOURCE)
    extra: dict = dataclasses.field(default_factory=dict)  # added to the document's "task"
    dataset: dict | None = None  # a dataset loaded by name: id, config, revision, splits

    def __post_init__(self):
        self.recipe_source = self.recipe_source or results.RECIPE_SOURCE

    extra_protocol: dict = dataclasses.field(default_factory=dict)  # added to "protocol"


def _targets(job_splits: dict, spec, names) -> dict:
    return {name: datasets.encode_labels(split, spec, names) for name, split in job_splits.items()}


def read_hub_splits(config, spec) -> tuple[dict, dict]:
    """({split: Split}, provenance) of --hf_dataset: the splits asked for or the defaults, said
    in one printed line; a default test split without labels is left out, and said."""
    from trainer.finetuning import hub

    loaded = hub.load(
        config.hf_dataset,
        config.hf_config,
        config.hf_revision,
        hint="--hf_dataset DIR",
    )
    asked = {"train": config.train_split, "dev": config.dev_split, "test": config.test_split}
    used = hub.choose_splits(loaded, asked)
    splits, notes = {}, []
    for ours, theirs in list(used.items()):
        columns, rows, classes = datasets.dataset_rows(loaded.splits[theirs])
        if ours == "test" and not config.test_split and hub.unlabelled(rows, spec.label_column):
            del used[ours]  # GLUE's test splits: -1 everywhere
            notes.append(f"its {theirs} split has no labels (not scored)")
            continue
        label = loaded.label(theirs)
        classes = classes.get(spec.label_column)
        splits[ours] = datasets.split_from_rows(
            label, columns, rows, spec, classes, labels_optional=ours == "test"
        )
    print(loaded.said(used, {n: len(split) for n, split in splits.items()}, notes), flush=True)
    for ours in ("dev", "test"):
        if used.get(ours) == used["train"]:
            _warn_trained_on(ours, f"split {used[ours]}")
    return splits, loaded.provenance(used)


def _warn_trained_on(split: str, named: str) -> None:
    """Selecting epochs on (or scoring) the training data is allowed, for a quick check that
    a model can fit, but its scores say nothing of unseen text: said, not refused."""
    role = "selects the epoch" if split == "dev" else "is scored"
    print(
        f"warning: {split} ({named}) is the training data: it {role} on examples the "
        "model trains on, so its scores measure fitting, not generalisation",
        flush=True,
    )


def _same_file(a: str, b: str) -> bool:
    if fs.is_remote(a) or fs.is_remote(b):
        return a.rstrip("/") == b.rstrip("/")
    return os.path.realpath(a) == os.path.realpath(b)


def read_task(config) -> tuple[dict, tuple | None, dict, dict | None]:
    """({split: Split}, label names or None, {split: targets}, the provenance of a dataset
    loaded by name), before any model is loaded, so that bad data fails fast."""
    spec = config.spec()
    source = None
    if config.hf_dataset:
        splits, source = read_hub_splits(config, spec)
    else:
        paths = {"train": config.train, "dev": config.dev, "test": config.test}
        splits = {
            name: datasets.read_split(path, spec, config.input_format, name == "test")
            for name, path in paths.items()
            if path
        }
        for name in ("dev", "test"):
            if paths[name] and _same_file(paths[name], config.train):
                _warn_trained_on(name, paths[name])
    named = task_kinds.get(config.task_type).named_classes
    names = datasets.label_names(splits["train"]) if named else None
    if "test" in splits and datasets.mark_unlabelled(splits["test"], names):
        print(
            f"note: test ({splits['test'].path}) has no labels: each seed's predictions are "
            "written, no test score",
            flush=True,
        )
    for name in ("dev", "test"):
        if name in splits and names is not None:
            datasets.check_trained_labels(splits["train"], splits[name])
    if names is not None and config.metric == "f1" and len(names) != 2:
        raise UserError(
            f"--metric f1 is the binary F1, but {splits['train'].path} has {len(names)} "
            "labels; use macro_f1"
        )
    return splits, names, _targets(splits, spec, names), source


def own_job(config, size: str = "base") -> Job:
    """The task of the user's own files; its recipe the flags', else the model size's."""
    splits, names, _, source = read_task(config)
    return Job(
        "task",
        config.task_type,
        splits,
        names,
        config.recipe(config.metric, recipes.own_recipe(size)),
        config.seed_list(),
        config.output_dir,
        recipe_source=recipes.SIZE_SOURCE if size in recipes.SIZE_RECIPES else None,
        dataset=source,
    )


def glue_jobs(config, size: str = "base") -> list[Job]:
    """Every GLUE task asked for, read whole before any model is loaded; a tiny or small
    model's rate replaces the task's (`recipes.glue_recipe`)."""
    jobs = []
    for task in glue.tasks_of(config.task):
        source = None
        if config.glue_dir:
            splits = glue.read(config.glue_dir, task)
        else:
            splits, source = glue.read_hub(task, config.hf_revision)
        _targets(splits, task.spec, task.labels or None)  # a dev label train lacks: now
        folder = (
            fs.join(config.output_dir, task.name) if config.task == "glue" else config.output_dir
        )
        extra = {"glue": task.name, "reported": list(task.reported)}
        if task.name == "mnli":
            extra.update(test_split="dev_mismatched (reported as accuracy_mm)", test_label="dev_mm")
        jobs.append(
            Job(
                task.name,
                task.task_type,
                splits,
                task.labels or None,
                config.recipe(task.metric, recipes.glue_recipe(task.recipe, size)),
                config.seed_list(task.recipe.seeds),
                folder,
                glue.RECIPE_SOURCE,
                extra,
                source,
            )
        )
    return jobs


def pack_task(config, source, job: Job):
    """(TaskData: the splits tokenized and packed as numpy, per split its counts, the
    tokenizer's ids)."""
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    max_length = config.max_length or min(DEFAULT_MAX_LENGTH, source.max_sequence_length)
    if max_length > source.max_sequence_length:
        raise UserError(
            f"--max_length {max_length} is more than the model's "
            f"{source.max_sequence_length} positions"
        )
    spec = datasets.TaskSpec(job.task_type, "", "pair" if is_pair(job) else None, "")
    targets = _targets(job.splits, spec, job.names)
    packer = packing.Packer(tokenizer, info, source.family, max_length)
    packed = {name: packer.pack(split.texts, split.pairs) for name, split in job.splits.items()}
    length = max(len(row) for p in packed.values() for row in p.rows)
    segments = families.get(source.family).takes_segment_ids
    arrays = {
        name: (p.features(length, info.pad_id, segments), targets[name])
        for name, p in packed.items()
    }
    outputs = 1 if job.names is None else len(job.names)
    data = protocol.TaskData(
        job.task_type, outputs, arrays["train"], arrays["dev"], arrays.get("test")
    )
    counts = {
        name: {
            "examples": len(split),
            "skipped_empty": split.skipped_empty,
            "skipped_malformed": split.skipped_malformed,
            "truncated": packed[name].truncated,
            "unlabelled": split.unlabelled,
            "path": split.path,
            "max_length": max_length,
        }
        for name, split in job.splits.items()
    }
    return data, counts, info


def is_pair(job: Job) -> bool:
    return job.splits["train"].pairs is not None
