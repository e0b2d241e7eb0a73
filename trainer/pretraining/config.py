"""All trainer settings in one typed dataclass of typed parts, and the command line built from
it.

Every flag is a field of a part of `TrainConfig` (data, model, schedule, optimizer...); the
argparse parser is generated from the fields so flag names, types, defaults and help cannot
drift apart. Flags of the Hugging Face
"language-modeling-tpu" seed (`run_mlm.py`) are accepted as aliases with the same meaning.

Example:
    >>> config = parse_args(["--train_data", "gs://b/train", "--eval_data", "gs://b/eval",
    ...                      "--tokenizer", "tok/", "--output_dir", "out/", "--model", "tiny"])
    >>> config.model.family, config.model.model, config.schedule.learning_rate  # None: by size,
    trainer/pretraining/plan.py ('roberta', 'tiny', None)
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from types import SimpleNamespace

from common import flags
from common.flags import flag
from common.publish import PushFlags
from trainer import families
from trainer.data import masking
from trainer.families import recipe_flags, sizes
from trainer.families.recipe_flags import SCHEDULES
from trainer.models import model
from trainer.pretraining import context_extension, phases
from trainer.pretraining.plan import CONTINUED_LEARNING_RATE, DEFAULT_LEARNING_RATES
from trainer.run_folder.lock_flags import LockFlags
from trainer.startup import keras_backend
from trainer.startup.device_flags import DeviceFlags

# The masking keys hold the seed in an int32 (trainer/data/masking.py), Keras' seeding takes <
# 2**32.
MAX_SEED = 2**31 - 1

# The legacy HF example's `--pretrained_model_config` names a Hugging Face config; we train
# from scratch, so map the ones it documents to (family, size).
_LEGACY_MODEL_CONFIGS = {
    name: (family.name, size)
    for family in families.ALL
    for name, size in family.legacy_configs.items()
}


def _recipe_default(text: str, name: str) -> str:
    return (
        f"{text.rstrip('.')}. Default: {recipe_flags.DEFAULTS[name]}, or the family's "
        "pretraining recipe."
    )


@dataclasses.dataclass(frozen=True)
class DataFlags:
    """The data, its tokenizer and where the run writes."""

    train_data: str = flag(
        "Folder of training shards (manifest or legacy format), local or gs://.",
        aliases=["--train_dataset"],
        required=True,
    )
    eval_data: str = flag("Folder of evaluation shards.", aliases=["--eval_dataset"], required=True)
    tokenizer: str = flag(
        "Tokenizer folder (tokenizer.json, tokenizer_config.json); by "
        "default the one the training split's manifest names."
    )
    output_dir: str = flag(
        "Where checkpoints, logs and metrics go (local or gs://).", required=True
    )
    max_length: int = flag(
        "Sequence length of the data; read from the manifest when "
        "omitted (required for legacy-format shards).",
        minimum=1,
    )
    phases: str = flag(
        "Switch the training data and masking rate at given steps (mmBERT, Ettin): "
        "'STEP:DATA:RATE;STEP:DATA:RATE...', DATA a prepared training split (empty: the previous "
        "phase's data reads on), RATE in (0, 1) (empty: the previous phase's); phase 0 is "
        "--train_data at --mlm_probability (docs/training.md, Phases)."
    )

    @property
    def phase_list(self) -> tuple:
        """The flag's phases (`trainer.pretraining.phases.PhaseFlag`), checked when parsed."""
        return phases.parse(self.phases)


@dataclasses.dataclass(frozen=True)
class ModelFlags:
    """What is trained: the family, its size, overrides of its config, or a checkpoint."""

    model: str = flag("Named size.", "base", choices=sizes.NAMES)
    family: str = flag("Model family.", families.DEFAULT, choices=families.NAMES)
    config: dict = flag(
        "JSON overrides of the backbone config, e.g. "
        '\'{"num_layers": 1, "hidden_dim": 32}\': arguments the family\'s '
        "keras-hub backbone takes (trainer/models/model.py check_overrides)."
    )
    init_from: str = flag(
        "Continue pretraining this model (continued / domain-adaptive pretraining): a Hugging "
        "Face folder (config.json + model.safetensors) or Hub id, a keras-hub masked-LM preset "
        "(folder, name or kaggle:// handle), or one of our run folders. Family, sizes and "
        "positions come from it, the data must use its tokenizer; default learning rate "
        f"{CONTINUED_LEARNING_RATE:g} (docs/training.md)."
    )
    pretrained_model_config: str = flag(
        "Legacy flag (HF example): a Hugging Face config name mapped to --family/--model "
        "(weights are not "
        f"loaded). One of {sorted(_LEGACY_MODEL_CONFIGS)}."
    )

    @property
    def family_record(self) -> families.Family:
        """--family's record: where the family's name enters a pretraining run (its run
        looks it up here once, unless --init_from gives the checkpoint's)."""
        return families.get(self.family)


@dataclasses.dataclass(frozen=True)
class ExecutionFlags:
    """How the train step runs: the Keras backend, precision (legacy), compilation. (The
    devices are `DeviceFlags`, shared with fine-tuning.)"""

    backend: str = flag(
        "Keras backend; default KERAS_BACKEND, else tensorflow. Read before "
        "Keras is imported (trainer/startup/keras_backend.py); a run keeps the "
        "backend it started with.",
        choices=keras_backend.BACKENDS,
    )
    bfloat16: bool = flag("Legacy flag (HF example): same as --precision bf16.", False)
    jit_compile: str = flag(
        "XLA-compile the train step: auto = yes, except MirroredStrategy "
        "over CPU devices (keras#19005).",
        "auto",
        choices=("auto", "true", "false"),
    )
    steps_per_execution: int = flag(
        "Train steps per compiled call (default: 100 on GPU and TPU, 1 on a CPU).", minimum=1
    )


@dataclasses.dataclass(frozen=True)
class BatchFlags:
    """Examples per optimizer update."""

    per_replica_batch_size: int = flag(
        "Examples per replica per micro-batch (per step without --grad_accum_steps).", 8, minimum=1
    )
    grad_accum_steps: int = flag(
        "Micro-batches per optimizer update (gradient accumulation): the global batch is "
        "per_replica_batch_size x replicas x N. Steps (--train_steps, --save_every, "
        "--eval_every, warmup, logs, the resume point) count updates.",
        1,
        aliases=["--gradient_accumulation_steps"],
        minimum=1,
    )


@dataclasses.dataclass(frozen=True)
class ScheduleFlags:
    """How long the run trains and its learning rate over the steps (peak, warmup, decay)."""

    train_steps: int = flag("Optimizer steps (alternative to --epochs).", minimum=1)
    epochs: int = flag("Passes over the training data.", aliases=["--num_epochs"], minimum=1)
    learning_rate: float | None = flag(
        "Peak learning rate. Default: by --model size ("
        + ", ".join(f"{size} {rate:g}" for size, rate in DEFAULT_LEARNING_RATES.items())
        + "), or the rate a resumed run used.",
        greater_than=0,
    )
    # The flags of trainer/pretraining/pretrain_recipe.py (here, in OptimizerFlags and
    # MaskingFlags) default to None: a given flag wins, then the resumed run's value, then the
    # family's recipe, then the default named in the help.
    warmup_ratio: float | None = flag(
        _recipe_default(
            "Fraction of steps of linear warmup (the legacy HF example uses 0.05).", "warmup_ratio"
        ),
        minimum=0,
        maximum=1,
    )
    schedule: str | None = flag(
        _recipe_default(
            "Learning rate after the warmup: linear = linear decay to 0 at the last step "
            "(BERT/RoBERTa); wsd = warmup-stable-decay: the peak held, then a 1 - sqrt decay "
            "to 0 over the last --decay_ratio of the run (or --decay_from_step/--decay_steps).",
            "schedule",
        ),
        choices=SCHEDULES,
    )
    decay_ratio: float | None = flag(
        _recipe_default(
            "With --schedule wsd: the share of the run in the decay (0: held to the last step, "
            "a stable phase to decay later).",
            "decay_ratio",
        ),
        minimum=0,
        maximum=1,
    )
    extend_context: bool = flag(
        "Restart a trained run on data prepared at a longer --max_length (a family with rotary "
        "positions; its global rotary theta may change through --config), as ModernBERT's "
        "second phase. What any restart may change may change too ("
        f"{context_extension.RESTART_MAY_CHANGE}); any other change is refused "
        "(docs/modernbert.md).",
        False,
    )
    decay_from_step: int | None = flag(
        "With --schedule wsd: start the decay at this step (a run held at its peak, restarted "
        "to decay); with --decay_steps, the run ends at their sum.",
        minimum=0,
    )
    decay_steps: int | None = flag(
        "With --decay_from_step: updates of the 1 - sqrt decay to 0.", minimum=1
    )

    def check_decay_flags(self) -> None:
        """--decay_from_step S with --decay_steps D: the run ends at S + D (--train_steps, if
        given, must say so)."""
        if (self.decay_from_step is None) != (self.decay_steps is None):
            raise ValueError("give --decay_from_step and --decay_steps together")
        if self.decay_steps is None:
            return
        end = self.decay_from_step + self.decay_steps
        if self.epochs is not None:
            raise ValueError(
                f"--decay_from_step/--decay_steps end the run at step {end}: drop --epochs"
            )
        if self.train_steps not in (None, end):
            raise ValueError(
                f"--train_steps {self.train_steps}, but the decay ends at step {end} "
                "(--decay_from_step + --decay_steps): drop --train_steps or give that"
            )
        flags.resolve(self, train_steps=end)


@dataclasses.dataclass(frozen=True)
class OptimizerFlags:
    """AdamW's settings besides its learning rate (trainer/training/optimizer.py)."""

    weight_decay: float | None = flag(
        _recipe_default("AdamW decoupled weight decay (not on biases/LayerNorm).", "weight_decay"),
        aliases=["--weight_decay_rate"],
        minimum=0,
    )
    # A beta of 1 divides by zero in Adam's bias correction (1 - beta**t).
    adam_beta1: float | None = flag(
        _recipe_default("AdamW beta_1.", "adam_beta1"), minimum=0, less_than=1
    )
    adam_beta2: float | None = flag(
        _recipe_default("AdamW beta_2.", "adam_beta2"), minimum=0, less_than=1
    )
    adam_epsilon: float | None = flag(
        _recipe_default("AdamW epsilon.", "adam_epsilon"), greater_than=0
    )
    clip_norm: float | None = flag(
        _recipe_default("Global gradient-norm clipping (0 = off).", "clip_norm"), minimum=0
    )
    update_clipping: str | None = flag(
        _recipe_default(
            "StableAdamW's per-tensor update clipping: each tensor's step scaled by "
            "1 / max(1, RMS of g / sqrt(v_hat)) (trainer/backends/update_clipping.py).",
            "update_clipping",
        ),
        choices=("on", "off"),
    )


@dataclasses.dataclass(frozen=True)
class MaskingFlags:
    """What the masked-language objective masks (trainer/data/masking.py)."""

    mlm_probability: float | None = flag(
        _recipe_default("Fraction of maskable tokens selected.", "mlm_probability"),
        greater_than=0,
        maximum=1,
    )
    masking: str = flag(
        "What is masked together: single tokens (BERT/RoBERTa), every piece "
        "of a word (BERT whole-word masking) or spans of 1-10 tokens, "
        "geometric lengths (SpanBERT).",
        "token",
        choices=masking.MODES,
    )


@dataclasses.dataclass(frozen=True)
class RunFlags:
    """The run's seeds, data order window, and its loop: evaluation, checkpoints, output."""

    seed: int = flag(
        "Seed for weights, data order, dropout and masking.", 42, minimum=0, maximum=MAX_SEED
    )
    shuffle_buffer_size: int = flag(
        "Records per shuffle window (trainer/data/data_order.py).", 2**16, minimum=1
    )
    # Loop, evaluation, checkpoints.
    eval_every: int = flag("Evaluate every N steps (and always at the end).", 1000, minimum=1)
    save_every: int = flag(
        "Checkpoint and back up every N steps (and at the end).", 1000, minimum=1
    )
    # At least one: the newest checkpoint is what export and predict read.
    keep_checkpoints: int = flag("How many ckpt-*.weights.h5 to keep.", 3, minimum=1)
    eval_seed: int = flag("Seed of the fixed evaluation masks.", 1234, minimum=0, maximum=MAX_SEED)
    max_eval_batches: int = flag(
        "Cap on evaluation batches per evaluation (default: all).", minimum=1
    )
    verbose: int = flag(
        "Keras progress output: 0 silent, 1 bar, 2 one line per interval.", 1, minimum=0, maximum=2
    )


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Every flag of pretraining, in typed parts (`flags.group`: their flags join one command
    line, flat, in this order). The devices, the lock and the push are the parts fine-tuning
    shares: --strategy, --cpu_replicas, --tpu, --precision, --fused_attention...
    (trainer/startup/device_flags.py), --takeover_lock, --lock_timeout_hours
    (trainer/run_folder/folder_lock.py), --push_to, --language, --license (common/publish.py)."""

    lock: LockFlags = flags.group(LockFlags)
    device: DeviceFlags = flags.group(DeviceFlags)
    push: PushFlags = flags.group(PushFlags)
    data: DataFlags = flags.group(DataFlags)
    model: ModelFlags = flags.group(ModelFlags)
    execution: ExecutionFlags = flags.group(ExecutionFlags)
    batch: BatchFlags = flags.group(BatchFlags)
    schedule: ScheduleFlags = flags.group(ScheduleFlags)
    optimizer: OptimizerFlags = flags.group(OptimizerFlags)
    masking: MaskingFlags = flags.group(MaskingFlags)
    run: RunFlags = flags.group(RunFlags)

    def __post_init__(self):
        # The checks in the order of the flat flags' days: a command with two faults is told
        # of the same one. (PushFlags checked itself when built: a bad target or card metadata
        # fails now, not after training.)
        model_flags = self.model
        if model_flags.pretrained_model_config:
            if model_flags.pretrained_model_config not in _LEGACY_MODEL_CONFIGS:
                raise ValueError(
                    f"--pretrained_model_config {model_flags.pretrained_model_config!r} is not "
                    f"one of {sorted(_LEGACY_MODEL_CONFIGS)}; use --family and --model instead."
                )
            family, size = _LEGACY_MODEL_CONFIGS[model_flags.pretrained_model_config]
            flags.resolve(model_flags, family=family, model=size)
        if self.execution.bfloat16:
            flags.resolve(self, device=dataclasses.replace(self.device, precision="bf16"))
        self.device.check_devices()
        self.schedule.check_decay_flags()
        phases.parse(self.data.phases)  # a bad --phases is a usage error, named now
        if (self.schedule.train_steps is None) == (self.schedule.epochs is None):
            raise ValueError("give exactly one of --train_steps and --epochs")
        if self.execution.backend is None:  # else the flag chose it (startup/keras_backend.py)
            keras_backend.check()
        if problem := flags.out_of_bounds(TrainConfig, SimpleNamespace(**self.to_dict())):
            raise ValueError(problem)
        model.check_overrides(model_flags.family_record, model_flags.model, model_flags.config)
        if model_flags.init_from and (model_flags.config or model_flags.pretrained_model_config):
            raise ValueError(
                "--init_from takes the model's family and sizes from the "
                "checkpoint: drop --config / --pretrained_model_config"
            )

    def parts(self) -> list:
        return [getattr(self, field.name) for field in dataclasses.fields(self)]

    def to_dict(self) -> dict:
        """Every flag under its own name, flat, in --help order (run_config.json records it)."""
        return {name: value for part in self.parts() for name, value in asdict(part).items()}

    def with_flags(self, **values) -> TrainConfig:
        """A copy with the flags named (flat, as on the command line) changed in their parts;
        the copy checks itself as the parsed flags were checked."""
        changed = {}
        for field in dataclasses.fields(self):
            part = getattr(self, field.name)
            names = [f.name for f in dataclasses.fields(part) if f.name in values]
            if names:
                changed[field.name] = dataclasses.replace(
                    part, **{name: values.pop(name) for name in names}
                )
        if values:
            raise TypeError(f"no such flags: {sorted(values)}")
        return dataclasses.replace(self, **changed)


def parse_args(argv=None) -> TrainConfig:
    """Parses flags into a `TrainConfig`; a usage error is one line, exit 2."""
    parser = flags.ArgumentParser(
        prog="python -m trainer.task",
        description=f"Pretrain a {families.said()} masked language model with Keras 3 / keras-hub.",
    )
    return flags.parse(parser, TrainConfig, argv)
