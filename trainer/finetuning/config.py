"""The flags of `python -m trainer.finetune`, one dataclass (as trainer/pretraining/config.py is
pretraining's): the task's files or dataset, its columns and kind, the recipe, the seeds, the
devices (`DeviceFlags`) and the output folder's lock (`LockFlags`).

Example:
    >>> config = flags.parse(flags.ArgumentParser(), FinetuneFlags, ["--model", "runs/tiny",
    ...     "--train", "t.csv", "--dev", "d.csv", "--output_dir", "out"])
"""

from __future__ import annotations

import dataclasses

from common import flags
from common.flags import flag
from trainer.finetuning import recipes
from trainer.models import pooling
from trainer.run_folder.lock_flags import LockFlags
from trainer.startup import keras_backend
from trainer.startup.device_flags import DeviceFlags
from trainer.tasks import datasets, glue, metrics, tagging, task_kinds

ALL_METRICS = tuple(metrics.HIGHER_IS_BETTER)
# cramming's one recipe (results.RECIPE_SOURCE), for a task of the user's own files with a
# base or large model (tiny and small: trainer/finetuning/recipes.py).
DEFAULTS = recipes.CRAMMING_DEFAULTS


@dataclasses.dataclass(frozen=True)
class FinetuneFlags(DeviceFlags, LockFlags):  # the trainer's --strategy, --takeover_lock, ...
    model: str = flag(
        "The pretrained model: a training run folder (newest checkpoint), a "
        ".weights.h5 checkpoint or our keras-hub export.",
        required=True,
    )
    output_dir: str = flag("Where results.json and the TensorBoard logs go.", required=True)
    train: str = flag(
        "Training examples: a .jsonl, .csv or .tsv file, or a Hugging Face "
        "save_to_disk folder of one split (required without --task)."
    )
    dev: str = flag("Development examples (selection of the best epoch; required without --task).")
    test: str = flag(
        "Test examples, scored once with the selected epoch's weights (without labels: "
        "predicted into OUTPUT_DIR/predictions/, not scored)."
    )
    hf_dataset: str = flag(
        "A Hugging Face dataset by name (e.g. stanfordnlp/imdb), read through "
        "datasets.load_dataset: from the Hub, or offline from the local datasets cache "
        "(HF_DATASETS_CACHE); or a DatasetDict.save_to_disk folder. Instead of "
        "--train/--dev/--test, as prepare's --hf_dataset."
    )
    hf_config: str = flag("The --hf_dataset's configuration (subset), e.g. sst2 of glue.")
    hf_revision: str = flag(
        "A branch, tag or commit of the --hf_dataset's repository (of nyu-mll/glue for --task "
        "without --glue_dir); default: its main branch. The commit used is recorded."
    )
    train_split: str = flag("The --hf_dataset's split to train on; default train.")
    dev_split: str = flag(
        "The --hf_dataset's split that selects the epoch; default validation (else dev, valid)."
    )
    test_split: str = flag(
        "The --hf_dataset's split scored once at the end; default test where it has labels; "
        "none: no test."
    )
    task: str = flag(
        "A GLUE task with its own columns, metrics and recipe, read from --glue_dir or, "
        "without it, nyu-mll/glue by name; or glue: the 8 tasks (no WNLI) and the GLUE score.",
        choices=glue.NAMES,
    )
    glue_dir: str = flag(
        "GLUE's download (CoLA/train.tsv, MNLI/dev_matched.tsv, ...) or "
        "save_to_disk folders of nyu-mll/glue configs (cola/train, ...); "
        "default: nyu-mll/glue by name."
    )
    mnli_start: bool = flag(
        "With --task glue: RTE, MRPC and STS-B start from the backbone "
        "of MNLI's best seed, as MosaicBERT does.",
        False,
    )
    card: str = flag(
        "An export (trainer.export's output_dir, or one of its keras-hub/ or "
        "hf/ folders) whose model card(s) get the dev scores in model-index."
    )
    input_format: str = flag(
        "File format; default: hf for a folder, else by extension.", choices=datasets.FORMATS
    )
    text_column: str = flag("The column of the (first) text.", "text")
    text_pair_column: str = flag("The column of the second text (a text-pair task).")
    label_column: str = flag("The column of the label.", "label")
    task_type: str = flag(
        "classification (labels named in train), regression (a number), embedding "
        "(query/positive pairs, scored by retrieval on a BEIR folder), reranking (a "
        "cross-encoder, scored by reranking BM25's candidates) or tagging (words and tags).",
        task_kinds.CLASSIFICATION.name,
        choices=task_kinds.NAMES,
    )
    metric: str = flag(
        "The dev score that selects the best epoch; default accuracy for "
        "classification, spearman for regression, ndcg@10 for embedding and reranking, "
        "entity_f1 for tagging (a GLUE task: its own).",
        choices=ALL_METRICS,
    )
    max_length: int = flag(
        "Tokens per example, special tokens included; longer ones are "
        "truncated and counted. Default: 128, or the model's positions "
        "if fewer.",
        minimum=8,
    )
    epochs: int = flag(
        f"Epochs per seed. Default: by the model's size ({recipes.by_size('epochs')}), else 5 "
        "or a GLUE task's own.",
        minimum=1,
    )
    batch_size: int = flag(
        "Examples per step, the global batch: split over the replicas (--cpu_replicas, GPUs, "
        "TPU cores), so a multiple of them. Default: 16, a GLUE task's own.",
        minimum=1,
    )
    learning_rate: str = flag(
        "Peak learning rate, or auto: one seed at each rate of a small grid around the "
        "default, then every seed at the best on dev. Default: by the model's size "
        f"({recipes.by_size('learning_rate')}), else 4e-5 or a GLUE task's own."
    )
    pooling: str = flag(
        "What the classifier's head reads: cls (the first token) or mean (the mean of the "
        f"non-padding tokens). Default: by the model's size ({recipes.by_size('pooling')}), "
        "else cls.",
        choices=pooling.CHOICES,
    )
    warmup_ratio: float = flag(
        "Share of the steps spent warming up linearly.", 0.1, minimum=0.0, maximum=1.0
    )
    weight_decay: float = flag(
        "AdamW weight decay (not on biases and LayerNorm).", 0.01, minimum=0.0
    )
    seeds: str = flag(
        "Comma-separated seeds, one fine-tuning each. Default: 1,2,3, a GLUE "
        "task's own (5 on RTE, MRPC, STS-B; 1 on MNLI)."
    )
    from_scratch: bool = flag(
        "Same architecture, random weights: the reference that shows what pretraining bought.",
        False,
    )
    temperature: float = flag(
        "embedding: InfoNCE's temperature (scores are cosines / T; 0.05 is "
        "sentence-transformers' scale 20).",
        0.05,
        minimum=1e-4,
    )
    gradient_chunk: int = flag(
        "embedding: rows embedded at a time by gradient caching (GradCache): a chunk's "
        "memory, the whole batch's gradient. Default: the whole batch at once.",
        minimum=1,
    )
    packing: str = flag(
        "embedding, tagging: several short texts (sentences) to a row where the family reads "
        "them apart (ModernBERT's document masks), instead of a padded row each: auto = "
        "there, on (refused elsewhere) or off.",
        "auto",
        choices=("auto", "on", "off"),
    )
    rerank_top: int = flag(
        "reranking: BM25's candidates per query that the reranker reorders.", 100, minimum=1
    )
    tag_column: int = flag(
        "tagging: the CoNLL column of the tag (0-based, negative from the end).", -1
    )
    tag_scheme: str = flag(
        "tagging: how tags mark entities; default detected from the training file.",
        choices=tagging.SCHEMES,
    )
    jit_compile: str = flag(
        "XLA-compile the step: auto = yes on JAX and on accelerators, "
        "no for TensorFlow on a CPU (the compile outlasts a short "
        "fine-tune, and fails under MirroredStrategy over CPU devices).",
        "auto",
        choices=("auto", "true", "false"),
    )
    backend: str = flag(
        "Keras backend; default KERAS_BACKEND, else tensorflow.", choices=keras_backend.BACKENDS
    )

    def __post_init__(self):
        problem = flags.out_of_bounds(FinetuneFlags, self)
        if problem:
            raise ValueError(problem)
        # Raises for a malformed rate; the flag keeps the text given (a `recipes.Recipe` holds
        # the number, or `recipes.Auto`).
        recipes.rate(self.learning_rate, DEFAULTS.learning_rate)
        self.check_devices()
        self.seed_list(DEFAULTS.seeds)  # raises for a malformed list
        self._check_sources()
        if self.task:
            return
        kind = task_kinds.get(self.task_type)
        flags.resolve(self, metric=self.metric or kind.default_metric)
        wanted = kind.metrics(2)  # any number of classes: f1 is reported for two
        if self.metric not in wanted:
            raise ValueError(
                f"--metric {self.metric} does not score a {self.task_type} task "
                f"(choose one of {', '.join(wanted)})"
            )

    def _check_sources(self) -> None:
        """Either --task (with or without --glue_dir), --hf_dataset, or --train and --dev: never
        a mix."""
        self._check_dataset()
        if self.mnli_start and self.task != "glue":
            raise ValueError("--mnli_start needs --task glue (MNLI is fine-tuned first)")
        if self.card and self.from_scratch:
            raise ValueError(
                "--card with --from_scratch would put random weights' scores "
                "on the pretrained model's card"
            )
        if not self.task:
            if self.glue_dir:
                raise ValueError("--glue_dir needs --task")
            if not (self.hf_dataset or (self.train and self.dev)):
                raise ValueError("--train and --dev are required (or --hf_dataset, or --task)")
            return
        if self.glue_dir and self.hf_revision:
            raise ValueError("--hf_revision names a revision of nyu-mll/glue: not with --glue_dir")
        given = [
            f"--{n}"
            for n in ("train", "dev", "test", "metric", "text_pair_column")
            if getattr(self, n)
        ]
        if given:
            raise ValueError(
                f"--task brings its own files, columns and metric: drop {', '.join(given)}"
            )

    def _check_dataset(self) -> None:
        """--hf_dataset replaces --train/--dev/--test; its split and config flags need it."""
        if self.hf_dataset:
            # A kind with its own loop scores on folders of its own (embedding and reranking:
            # BEIR folders) and reads only its training data from the dataset.
            scored_apart = task_kinds.get(self.task_type).runner
            named = ("train",) if scored_apart else ("train", "dev", "test")
            clash = [
                f"--{n}" for n in (*named, "task", "glue_dir", "input_format") if getattr(self, n)
            ]
            if clash:
                raise ValueError(f"--hf_dataset names the data: drop {', '.join(clash)}")
            self._check_saved_folder()
            return
        # A kind with its own loop may read --dev_split / --test_split of its own folders
        # (embedding and reranking: a BEIR folder's judgements).
        splits = () if task_kinds.get(self.task_type).runner else ("dev_split", "test_split")
        lonely = [f"--{n}" for n in ("hf_config", "train_split", *splits) if getattr(self, n)]
        if self.hf_revision and not self.task:
            lonely.append("--hf_revision")
        if lonely:
            raise ValueError(f"{', '.join(lonely)} need(s) --hf_dataset")

    def _check_saved_folder(self) -> None:
        """A save_to_disk folder holds one configuration at one revision, already chosen
        when it was saved: --hf_config/--hf_revision cannot select anything there."""
        from trainer.tasks import hub

        given = [f"--{n}" for n in ("hf_config", "hf_revision") if getattr(self, n)]
        if given and hub.is_saved_folder(self.hf_dataset):
            raise ValueError(
                f"--hf_dataset {self.hf_dataset} is a save_to_disk folder: its configuration "
                f"and revision were fixed when it was saved; drop {', '.join(given)}"
            )

    def seed_list(self, default=DEFAULTS.seeds) -> list[int]:
        if self.seeds is None:
            return list(default)
        try:
            seeds = [int(s) for s in self.seeds.split(",") if s.strip()]
        except ValueError:
            raise ValueError(
                f"--seeds must be comma-separated integers, not {self.seeds!r}"
            ) from None
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"--seeds must name at least one seed, each once: {self.seeds!r}")
        return seeds

    def spec(self) -> datasets.TaskSpec:
        return datasets.TaskSpec(
            self.task_type, self.text_column, self.text_pair_column, self.label_column
        )

    def recipe(self, metric: str, default: glue.TaskDefaults = DEFAULTS) -> recipes.Recipe:
        """The flags where given, else `default` (the model size's, cramming's, or a GLUE
        task's own); with --learning_rate auto, `recipes.Auto` around the default rate."""
        return recipes.Recipe(
            self.epochs or default.epochs,
            self.batch_size or default.batch_size,
            recipes.rate(self.learning_rate, default.learning_rate),
            self.warmup_ratio,
            self.weight_decay,
            metric,
        )
