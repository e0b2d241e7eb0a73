"""The tasks of a fine-tuning command, resolved once from its flags (`build`): one frozen `Job`
per task, each read whole and checked before any model loads (`read_task`: the user's files or
a Hugging Face dataset; `glue_jobs`: GLUE's tasks), then tokenized and packed with the model's
own tokenizer (`pack_task`). Nothing below this module reads the flags: each takes its `Job`.

Example:
    >>> tasks = build(config, recipes.model_size(source.record))
    >>> tasks[0].recipe.learning_rate, tasks[0].seeds, tasks[0].settings.pooling
    (0.003, (1, 2, 3), 'mean')
"""

from __future__ import annotations

import dataclasses
import os

from common import fs, tokenizer_files
from common.errors import UserError
from trainer.finetuning import packing, protocol, recipes, results, runners
from trainer.tasks import datasets, glue, task_kinds

DEFAULT_MAX_LENGTH = 128  # cramming's GLUE length


@dataclasses.dataclass(frozen=True)
class Settings:
    """What every job of one command runs with, resolved from the flags once."""

    model: str  # --model as given (results.json names it)
    from_scratch: bool
    pooling: str  # --pooling, else the size's
    recipe_by_size: str  # which size gave the defaults, and why (`recipes.source_note`)
    max_length: int | None  # --max_length; None: the default or the model's positions
    jit_compile: str  # --jit_compile: auto, true or false (the devices decide `auto`)
    # Every flag as parsed, a record, not read field by field: results.json's protocol opens
    # with them, and a pod's hosts compare them (`job_run.check_hosts_agree`).
    flags: dict


@dataclasses.dataclass(frozen=True)
class Job:
    """One task to fine-tune: its splits read, labels, recipe, seeds and where results go.
    Built once (`build`) and never changed: `--learning_rate auto` runs a new `Job` at the
    chosen rate (`job_run.run_job`)."""

    name: str
    task_type: str
    splits: dict
    names: tuple | None
    recipe: recipes.Recipe
    seeds: tuple
    output_dir: str
    settings: Settings
    recipe_source: str = results.RECIPE_SOURCE  # cramming's
    extra: dict = dataclasses.field(default_factory=dict)  # added to the document's "task"
    dataset: dict | None = None  # a dataset loaded by name: id, config, revision, splits
    options: object = None  # a kind with its own loop: its settings (`task_kinds` runner)


def build(config, size: tuple[str, str]) -> list[Job]:
    """The jobs of the command's flags `config` for a model of `size` (`recipes.model_size`:
    its name and how it was found): GLUE's tasks, or the one task of the user's data."""
    settings = Settings(
        config.model,
        config.from_scratch,
        recipes.pooling(config.pooling, size[0]),
        recipes.source_note(*size),
        config.max_length,
        config.jit_compile,
        dataclasses.asdict(config),
    )
    if config.task:
        return glue_jobs(config, size[0], settings)
    runner = runners.of(config.task_type)
    if runner is not None:
        return runner.build(config, size[0], settings)
    return [own_job(config, size[0], settings)]


def _targets(job_splits: dict, spec, names) -> dict:
    return {name: datasets.encode_labels(split, spec, names) for name, split in job_splits.items()}


def read_hub_splits(loaded, asked: dict, spec) -> tuple[dict, dict]:
    """({split: Split}, provenance) of the --hf_dataset `loaded` (`hub.load`): the splits
    `asked` for ({"train": --train_split, ...}) or the defaults, said in one printed line; a
    default test split without labels is left out, and said."""
    from trainer.tasks import hub

    used = hub.choose_splits(loaded, asked)
    splits, notes = {}, []
    for ours, theirs in list(used.items()):
        columns, rows, classes = datasets.dataset_rows(loaded.splits[theirs])
        if ours == "test" and not asked["test"] and hub.unlabelled(rows, spec.label_column):
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
        from trainer.tasks import hub

        loaded = hub.load(
            config.hf_dataset, config.hf_config, config.hf_revision, hint="--hf_dataset DIR"
        )
        asked = {"train": config.train_split, "dev": config.dev_split, "test": config.test_split}
        splits, source = read_hub_splits(loaded, asked, spec)
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


def own_job(config, size: str, settings: Settings) -> Job:
    """The task of the user's own files; its recipe the flags', else the model size's."""
    splits, names, _, source = read_task(config)
    return Job(
        "task",
        config.task_type,
        splits,
        names,
        config.recipe(config.metric, recipes.own_defaults(size)),
        tuple(config.seed_list()),
        config.output_dir,
        settings,
        recipes.SIZE_SOURCE if size in recipes.SIZE_RECIPES else results.RECIPE_SOURCE,
        dataset=source,
    )


def glue_jobs(config, size: str, settings: Settings) -> list[Job]:
    """Every GLUE task asked for, read whole before any model is loaded; a tiny or small
    model's rate replaces the task's (`recipes.glue_defaults`). With --mnli_start, RTE, MRPC
    and STS-B say they start from MNLI's best seed (`finetune.glue_run` starts them so)."""
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
        if config.mnli_start and task.name in glue.MNLI_STARTED:
            extra["start"] = "MNLI's best seed (--mnli_start)"
        jobs.append(
            Job(
                task.name,
                task.task_type,
                splits,
                task.labels or None,
                config.recipe(task.metric, recipes.glue_defaults(task.defaults, size)),
                tuple(config.seed_list(task.defaults.seeds)),
                folder,
                settings,
                glue.RECIPE_SOURCE,
                extra,
                source,
            )
        )
    return jobs


def pack_task(source, job: Job):
    """(TaskData: the splits tokenized and packed as numpy, per split its counts, the
    tokenizer's ids)."""
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    given = job.settings.max_length
    max_length = given or min(DEFAULT_MAX_LENGTH, source.max_sequence_length)
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
    segments = source.family.takes_segment_ids
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
