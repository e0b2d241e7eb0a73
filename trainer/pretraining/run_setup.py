"""What a pretraining run is made of before it trains: the flags resolved against the saved
run, the data and tokenizer, the backbone's configuration, the plan, run_config.json, and the
checks a restart must pass (trainer/pretraining/task.py runs it).
"""

from __future__ import annotations

import dataclasses

import keras

from common import fs, manifest, prepared_dir, tokenizer_files, word_tables
from common.errors import UserError
from common.publish import PushFlags
from trainer.data import splits as data
from trainer.data.masking import MaskingSpec
from trainer.models import init_from, model, starting_point
from trainer.pretraining import context_extension, phases, pretrain_recipe
from trainer.pretraining import plan as plans
from trainer.pretraining.config import DataFlags, MaskingFlags, TrainConfig
from trainer.release import push
from trainer.run_folder.run_record import FROM_INIT, RunRecord


class RunConfigError(UserError):
    """output_dir holds a run that the current flags cannot continue."""


def write_run_files(run, run_config: dict, family, tokenizer_dir: str) -> None:
    """run_config.json (atomically, through its one writer: `RunRecord`) and a copy of the
    tokenizer files."""
    RunRecord.of(run_config, family).write(run.run_config)
    tokenizer_files.copy(tokenizer_dir, run.tokenizer_dir)


def remove_orphans(run) -> None:
    """Temporary files of writes that a kill interrupted (local folders only: an object
    upload leaves none). Only one process writes a run folder, so none of these is live."""
    if not fs.is_remote(run.root):
        temps = fs.TEMP_PREFIX + "*"
        fs.delete(fs.glob_in(run.root, "*/" + temps) + fs.glob_in(run.root, temps))


def tokenizer_of(train_data: str) -> str:
    """The tokenizer folder recorded in the training split's manifest (prepare writes it)."""
    if not fs.exists(prepared_dir.manifest_path(train_data.rstrip("/"))):
        raise RunConfigError(
            f"{train_data} has no manifest naming its tokenizer (legacy-format "
            "shards?); pass --tokenizer."
        )
    path = manifest.read_manifest(train_data, check_shards=False).tokenizer.get("path")
    if not path:
        raise RunConfigError(f"{train_data} does not name its tokenizer; pass --tokenizer.")
    return path


@dataclasses.dataclass(frozen=True)
class Inputs:
    """The tokenizer (loaded once) and the validated splits."""

    tokenizer: object
    info: tokenizer_files.TokenizerInfo
    train: data.SplitSource
    eval: data.SplitSource
    # The step at which the training data's stream starts (after a --extend_context restart:
    # the step the longer data took over; trainer/pretraining/context_extension.py).
    data_start_step: int = 0
    # --phases: each phase's flag and validated split (`phases.load`), then, once the resume
    # step is known, the phases the run trains (`phases.Phase`, phase 0 first).
    phase_flags: tuple = ()
    phases: tuple = ()


def load_inputs(flags: DataFlags) -> Inputs:
    tokenizer, info = tokenizer_files.load(flags.tokenizer)  # a bad folder: one line
    train_source = data.resolve_split(flags.train_data, info, flags.max_length)
    eval_source = data.resolve_split(flags.eval_data, info, train_source.max_length)
    data.check_one_prepare_run(train_source, eval_source)
    loaded = phases.load(flags.phase_list, info, train_source.max_length)
    return Inputs(tokenizer, info, train_source, eval_source, phase_flags=loaded)


def check_backend(asked: str | None) -> str:
    """The backend Keras runs, if --backend (`asked`) asks for no other."""
    backend = keras.backend.backend()
    if asked not in (None, backend):
        raise RunConfigError(
            f"--backend {asked}, but Keras was already imported with "
            f"{backend}; pass --backend on the command line."
        )
    return backend


def resolve(config: TrainConfig, saved: RunRecord | None) -> TrainConfig:
    """A copy of `config` with what the flags left open filled in: the backend Keras runs,
    the tokenizer the manifest names, the learning rate of the size (or of the saved run)."""
    backend = check_backend(config.execution.backend)
    return config.with_flags(
        backend=backend,
        tokenizer=config.data.tokenizer or tokenizer_of(config.data.train_data),
        learning_rate=plans.learning_rate(
            config.schedule.learning_rate,
            config.model.model,
            saved,
            continued=bool(config.model.init_from),
        ),
    )


def resolved(config: TrainConfig, trained: RunRecord | None):
    """(`resolve`d config with the family of --init_from and every recipe flag chosen
    (trainer/pretraining/pretrain_recipe.py), the run's `Family`, the checked `Initial` or
    None). The family is looked up here once: the flag's, or the checkpoint's."""
    config, initial = initial_model(resolve(config, trained))
    family = initial.family if initial else config.model.family_record
    return pretrain_recipe.apply(config, family.pretraining_recipe, trained), family, initial


def initial_model(config: TrainConfig):
    """With --init_from: (config with the checkpoint's family, the checked `Initial`)."""
    if not config.model.init_from:
        return config, None
    initial = init_from.resolve(config.model.init_from)
    return config.with_flags(family=initial.family.name), initial  # as recorded


def backbone_of(config, family, inputs: Inputs, initial) -> dict:
    """The checkpoint's backbone (once the data is known to fit it), or one of the size;
    refused in one line where the family cannot train it here (`Family.device_rule`)."""
    ids, length = inputs.info.special_token_ids, inputs.train.max_length
    if initial is None:
        backbone = model.backbone_config(
            family, config.model.model, inputs.info.vocab_size, length, config.model.config, ids
        )
    else:
        starting_point.check_tokenizer(initial, inputs.info, config.data.tokenizer)
        starting_point.check_length(initial, length)
        backbone = {**initial.backbone_config, **family.token_args(ids)}
    if problem := family.device_rule(backbone, length):
        raise RunConfigError(problem)
    return backbone


def masking_spec(flags: MaskingFlags, inputs: Inputs) -> MaskingSpec:
    info = inputs.info
    tables = {}
    if flags.masking == "whole_word":
        ends, mid = word_tables.unit_tables(inputs.tokenizer)
        tables = dict(
            word_starts=tuple(word_tables.word_starts(inputs.tokenizer)),
            unit_ends=tuple(ends),
            mid_character=tuple(mid),
        )
    return MaskingSpec(
        info.vocab_size,
        info.mask_id,
        tuple(info.all_special_ids),
        rate=flags.mlm_probability,
        masking=flags.masking,
        **tables,
    )


def run_config_of(config, runtime, inputs, plan, backbone, global_batch, initial) -> dict:
    """run_config.json of this attempt (its `attempts` and data start are added later)."""
    run_config = {
        **config.to_dict(),
        "family": config.model.family,
        "size": config.model.model,
        "init_from": None,
        "backbone_config": backbone,
        "max_length": inputs.train.max_length,
        "tokenizer": inputs.info.to_dict(),
        "seed": config.run.seed,
        "precision": runtime.device.precision,
        "total_steps": plan.total_steps,
        "warmup_steps": plan.warmup_steps,
        "decay_start_step": plan.decay_start,
        "decay_num_steps": plan.decay_steps,
        "global_batch_size": global_batch,
        "replicas": runtime.replicas,
        "grad_accum_steps": config.batch.grad_accum_steps,
        "input_pipelines": runtime.num_pipelines,
        "train_data_digest": inputs.train.digest,
        "jit_compile": runtime.device.jit,
        "fused_attention": runtime.device.fused_attention,
    }
    if initial is not None:
        run_config.update(size=FROM_INIT, init_from=initial.record())
    return run_config


def check_continuation(
    extend_context: bool, family, saved, trained, run_config: dict, where: str
) -> None:
    """Refuses a restart that changes a fixed setting of the saved run (trainer/pretraining/plan.py
    FIXED), except what --extend_context may change."""
    now = RunRecord.of(run_config, family)
    view = extension_view(extend_context, now, saved, trained, where)
    plans.check_continuation(view, run_config, where)


def data_start(
    extend_context: bool, family, saved, run_config: dict, start_step: int, inputs: Inputs
) -> Inputs:
    """Records where the training data's stream starts (and what an extension changed) and
    the phases (--phases); returns the inputs that read from there. Phases that have trained
    must be the saved run's (an extension replaces the data from its step: those are past)."""
    now = RunRecord.of(run_config, family)
    start = context_extension.data_start_step(saved, now, start_step)
    changed = context_extension.changes(saved, now) if extend_context else None
    run_config["data_start_step"] = start
    if changed:
        run_config["context_extension"] = changed
    first = phases.Phase(0, 0, inputs.train, start, run_config["mlm_probability"])
    built = phases.build(first, inputs.phase_flags)
    records = [phase.record() for phase in built]
    before = saved.raw.get("data_phases") if saved else None
    if not extend_context:
        phases.check_restart(before, records, start_step, run_config["output_dir"])
    run_config["data_phases"] = phases.with_reached(records, before, start_step)
    return dataclasses.replace(inputs, data_start_step=start, phases=built)


def extension_view(extend_context: bool, now: RunRecord, saved, trained, where: str):
    """The saved run config as a restart must match it: under --extend_context, with the
    settings an extension may change taken from this attempt
    (trainer/pretraining/context_extension.py). A run that saved no weights binds nothing:
    its command may have been refused at step 1 (a NaN loss), and the corrected command
    starts it afresh."""
    if not extend_context:
        return trained.raw if trained else None
    if trained is None:
        raise plans.PlanError(
            f"--extend_context: {where} holds no trained run to extend; start it without the flag"
        )
    return context_extension.allowed(saved, now, where)


def check_resume(
    saved: RunRecord | None, plan, start_step: int, where: str, decay_from_step: int | None
) -> None:
    """The restored step against the plan: not past the total, not past a --decay_from_step
    the run did not decay from."""
    plans.check_start(start_step, plan.total_steps, where)
    plans.check_decay_start(saved, plan, start_step, where, decay_from_step)


def plan_of(config, runtime, inputs, trained) -> tuple:
    """(global batch, plan): examples per optimizer update (Keras' own steps are
    micro-batches, ours are updates) and the steps of this attempt."""
    batch, schedule = config.batch, config.schedule
    plans.check_accumulation(runtime.backend, runtime.replicas, batch.grad_accum_steps)
    global_batch = batch.per_replica_batch_size * runtime.replicas * batch.grad_accum_steps
    examples = inputs.train.num_examples
    total_steps = schedule.train_steps or schedule.epochs * (examples // global_batch)
    if total_steps < 1:
        raise data.DataError(
            f"{config.data.train_data} holds fewer examples than one global batch of "
            f"{global_batch}."
        )
    phases.check_steps(inputs.phase_flags, total_steps, global_batch)
    plan = plans.make_plan(
        total_steps,
        config.run.save_every,
        config.run.eval_every,
        runtime.device.steps_per_execution,
        schedule.warmup_ratio,
        trained,
        plans.DecayFlags(schedule.decay_ratio, schedule.decay_from_step, schedule.decay_steps)
        if schedule.schedule == "wsd"
        else None,
        phases.starts(config.data.phase_list),
    )
    return global_batch, plan


def check_push(flags: PushFlags) -> None:
    """With --push_to, credentials must exist (on every host: any may be the chief): fail
    now, not after training."""
    if flags.push_target:
        push.check_credentials(flags.push_target)
