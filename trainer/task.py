"""Command line: pretrain a masked language model on prepared shards.

    python -m trainer.task --train_data gs://b/data/train --eval_data gs://b/data/validation \\
        --tokenizer gs://b/tokenizer --output_dir gs://b/runs/r1 --model base \\
        --strategy tpu --tpu local --per_replica_batch_size 32 --train_steps 100000

The same flags run on TensorFlow or JAX (`--backend`, or KERAS_BACKEND; trainer/backends/ holds
all that differs). Rerunning the same command after a preemption resumes at the last
backed-up step. Output
layout (the contract with trainer/export.py): run_config.json, tokenizer/,
checkpoints/ckpt-{step:08d}.weights.h5, backup/, logs/, history.json, metrics.json.
"""

from __future__ import annotations

import dataclasses
import sys

import keras

from common import fs, manifest, prepared_dir, schema, tokenizer_files
from common.errors import UserError, run_cli
from trainer import (
    attempts,
    backends,
    checkpoints,
    context_extension,
    data,
    export,
    families,
    folder_lock,
    init_from,
    model,
    pretrain_recipe,
    push,
    quiet,
    run_dir,
)
from trainer import callbacks as cb
from trainer import plan as plans
from trainer.config import TrainConfig, parse_args
from trainer.masking import MaskingSpec
from trainer.optimization import build_optimizer, update_count
from trainer.run_dir import RunDir
from trainer.train_step import MaskedLMTrainer


class RunConfigError(UserError):
    """output_dir holds a run that the current flags cannot continue."""


def write_run_files(run, run_config: dict, tokenizer_dir: str) -> None:
    """run_config.json (atomically) and a copy of the tokenizer files."""
    fs.write_json(run.run_config, run_config)
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
    # the step the longer data took over; trainer/context_extension.py).
    data_start_step: int = 0


def _inputs(config: TrainConfig) -> Inputs:
    tokenizer, info = tokenizer_files.load(config.tokenizer)  # a bad folder: one line
    train_source = data.resolve_split(config.train_data, info, config.max_length)
    eval_source = data.resolve_split(config.eval_data, info, train_source.max_length)
    data.check_one_prepare_run(train_source, eval_source)
    return Inputs(tokenizer, info, train_source, eval_source)


def check_backend(config: TrainConfig) -> str:
    """The backend Keras runs, if --backend asks for no other."""
    backend = keras.backend.backend()
    if config.backend not in (None, backend):
        raise RunConfigError(
            f"--backend {config.backend}, but Keras was already imported with "
            f"{backend}; pass --backend on the command line."
        )
    return backend


def resolve(config: TrainConfig, saved: dict | None) -> TrainConfig:
    """A copy of `config` with what the flags left open filled in: the backend Keras runs,
    the tokenizer the manifest names, the learning rate of the size (or of the saved run)."""
    backend = check_backend(config)
    return dataclasses.replace(
        config,
        backend=backend,
        tokenizer=config.tokenizer or tokenizer_of(config.train_data),
        learning_rate=plans.learning_rate(
            config.learning_rate, config.model, saved, continued=bool(config.init_from)
        ),
    )


def _resolved(config: TrainConfig, trained: dict | None):
    """(`resolve`d config with the family of --init_from and every recipe flag chosen
    (trainer/pretrain_recipe.py), the checked `Initial` or None)."""
    config, initial = _initial_model(resolve(config, trained))
    recipe = families.get(config.family).pretraining_recipe
    return pretrain_recipe.apply(config, recipe, trained), initial


def _initial_model(config: TrainConfig):
    """With --init_from: (config with the checkpoint's family, the checked `Initial`)."""
    if not config.init_from:
        return config, None
    initial = init_from.resolve(config.init_from)
    return dataclasses.replace(config, family=initial.family), initial


def _backbone(config, inputs: Inputs, initial) -> dict:
    """The checkpoint's backbone (once the data is known to fit it), or one of the size."""
    ids = inputs.info.special_token_ids
    if initial is None:
        return model.backbone_config(
            config.family,
            config.model,
            inputs.info.vocab_size,
            inputs.train.max_length,
            config.config,
            ids,
        )
    init_from.check_tokenizer(initial, inputs.info, config.tokenizer)
    init_from.check_length(initial, inputs.train.max_length)
    return {**initial.backbone_config, **families.get(initial.family).token_args(ids)}


def _build(config, runtime, spec, backbone, plan):
    """The compiled trainer model with a built optimizer (ready for `restore_state`)."""
    keras.mixed_precision.set_dtype_policy(model.dtype_policy(runtime.device.precision))
    with runtime.scope():
        keras.utils.set_random_seed(config.seed)
        masked_lm = model.build_masked_lm(config.family, backbone)
        model.bf16_lm_head(masked_lm)  # a no-op in float32
        if runtime.device.fused_attention:
            model.fuse_attention(masked_lm)
        trainer_model = MaskedLMTrainer(
            masked_lm, spec, seed=config.seed, eval_seed=config.eval_seed
        )
        # Any length builds the weights; a family without a position table has no most.
        length = families.get(config.family).max_positions(backbone) or 1
        dummy = {name: keras.ops.ones((1, length), "int32") for name in schema.FEATURES}
        with quiet.harmless_lines_hidden():
            trainer_model(dummy)  # build the weights (eagerly)
        optimizer = build_optimizer(
            config.learning_rate,
            plan.total_steps,
            plan.warmup_steps,
            config.weight_decay,
            config.adam_beta1,
            config.adam_beta2,
            config.adam_epsilon,
            config.clip_norm,
            config.grad_accum_steps,
            plan.decay,
            config.update_clipping == "on",
        )
        trainer_model.compile(
            optimizer=optimizer,
            jit_compile=runtime.device.jit,
            steps_per_execution=plan.steps_per_execution * config.grad_accum_steps,
        )
        optimizer.build(trainer_model.trainable_variables)  # so a backup can load into it
    return trainer_model, masked_lm


def _masking_spec(config, inputs: Inputs) -> MaskingSpec:
    info = inputs.info
    tables = {}
    if config.masking == "whole_word":
        ends, mid = tokenizer_files.unit_tables(inputs.tokenizer)
        tables = dict(
            word_starts=tuple(tokenizer_files.word_starts(inputs.tokenizer)),
            unit_ends=tuple(ends),
            mid_character=tuple(mid),
        )
    return MaskingSpec(
        info.vocab_size,
        info.mask_id,
        tuple(info.all_special_ids),
        rate=config.mlm_probability,
        masking=config.masking,
        **tables,
    )


def _run_config(config, runtime, inputs, plan, backbone, total_steps, global_batch) -> dict:
    return {
        **config.to_dict(),
        "family": config.family,
        "size": config.model,
        "init_from": None,
        "backbone_config": backbone,
        "max_length": inputs.train.max_length,
        "tokenizer": inputs.info.to_dict(),
        "seed": config.seed,
        "precision": runtime.device.precision,
        "total_steps": total_steps,
        "warmup_steps": plan.warmup_steps,
        "decay_start_step": plan.decay_start,
        "decay_num_steps": plan.decay_steps,
        "global_batch_size": global_batch,
        "replicas": runtime.replicas,
        "grad_accum_steps": config.grad_accum_steps,
        "input_pipelines": runtime.num_pipelines,
        "train_data_digest": inputs.train.digest,
        "jit_compile": runtime.device.jit,
        "fused_attention": runtime.device.fused_attention,
    }


def run(config: TrainConfig, extra_callbacks=()) -> dict:
    """Trains (or resumes) as `config` says; returns the final metrics. The chief holds the
    run folder's lock from before it reads the saved run until it returns."""
    with backends.errors_end_pod_processes():
        check_backend(config)
        runtime = backends.setup(config)
        with folder_lock.held(config, runtime.chief) as lock:
            return _train(config, runtime, lock, extra_callbacks)


def _train(config: TrainConfig, runtime, lock, extra_callbacks) -> dict:
    run_files = RunDir(config.output_dir)
    saved = fs.read_json(run_files.run_config) if fs.exists(run_files.run_config) else None
    # The saved plan binds only a run that has trained: a start killed before its first
    # backup is planned afresh from today's flags (warmup, default learning rate).
    trained = saved if checkpoints.has_trained(run_files) else None
    config, initial = _resolved(config, trained)
    _check_push(config)
    inputs = _inputs(config)
    global_batch, plan = _plan(config, runtime, inputs, trained)
    total_steps = plan.total_steps
    backbone = _backbone(config, inputs, initial)
    run_config = _run_config(config, runtime, inputs, plan, backbone, total_steps, global_batch)
    if initial is not None:
        run_config.update(size="from --init_from", init_from=initial.record())
    _check_hosts_agree(runtime, run_files, saved, run_config)
    plans.check_continuation(
        _extension_view(config, saved, trained, run_config, run_files.root),
        run_config,
        run_files.root,
    )
    trainer_model, masked_lm = _build(
        config, runtime, _masking_spec(config, inputs), backbone, plan
    )
    start_step = checkpoints.restore_state(run_files, trainer_model, masked_lm)
    if initial is not None and start_step == 0:  # a restart resumes the run, not the model
        init_from.load_into(masked_lm, initial)
    _check_resume(saved, plan, start_step, run_files.root, config)
    run_config["data_start_step"] = context_extension.data_start_step(saved, run_config, start_step)
    if config.extend_context and context_extension.changes(saved, run_config):
        run_config["context_extension"] = context_extension.changes(saved, run_config)
    inputs = dataclasses.replace(inputs, data_start_step=run_config["data_start_step"])
    if runtime.chief:  # only once every check passed: a refused command changes no file
        remove_orphans(run_files)
        run_config["attempts"] = attempts.history(saved, run_config, start_step)
        write_run_files(run_files, run_config, config.tokenizer)
    replanned = plans.warmup_change(trained, plan)
    if replanned:
        print(replanned)
    if start_step == total_steps:
        return finished_metrics(
            run_files,
            total_steps,
            global_batch,
            runtime.chief,
            lambda: _evaluate(config, runtime, trainer_model, inputs),
        )
    _recompile_for(start_step, plan, trainer_model, config, runtime)
    with data.replaced_splits_named(inputs.train, inputs.eval):
        log = _fit(
            config,
            runtime,
            trainer_model,
            masked_lm,
            plan,
            start_step,
            run_files,
            inputs,
            global_batch,
            [folder_lock.LockKept(lock)],
            extra_callbacks,
        )
    # The optimizer's own count, not the configured total: what the weights really saw.
    steps_done = update_count(trainer_model.optimizer)
    metrics = final_metrics(log.history, log.rates, steps_done, global_batch)
    if runtime.chief:
        fs.write_json(run_files.metrics, metrics)
    return _published(config, run_files, runtime.chief, metrics)


def _extension_view(config, saved, trained, run_config, where: str):
    """The saved run as a restart must match it: under --extend_context, with the settings an
    extension may change taken from this attempt (trainer/context_extension.py)."""
    if not config.extend_context:
        return saved
    if trained is None:
        raise plans.PlanError(
            f"--extend_context: {where} holds no trained run to extend; start it without the flag"
        )
    return context_extension.allowed(saved, run_config, families.get(config.family), where)


def _check_resume(saved, plan, start_step: int, where: str, config) -> None:
    """The restored step against the plan: not past the total, not past a --decay_from_step
    the run did not decay from."""
    plans.check_start(start_step, plan.total_steps, where)
    plans.check_decay_start(saved, plan, start_step, where, config.decay_from_step)


def _plan(config, runtime, inputs, trained) -> tuple:
    """(global batch, plan): examples per optimizer update (Keras' own steps are
    micro-batches, ours are updates) and the steps of this attempt."""
    plans.check_accumulation(runtime.backend, runtime.replicas, config.grad_accum_steps)
    global_batch = config.per_replica_batch_size * runtime.replicas * config.grad_accum_steps
    total_steps = config.train_steps or config.epochs * (inputs.train.num_examples // global_batch)
    if total_steps < 1:
        raise data.DataError(
            f"{config.train_data} holds fewer examples than one global batch of {global_batch}."
        )
    plan = plans.make_plan(
        total_steps,
        config.save_every,
        config.eval_every,
        runtime.device.steps_per_execution,
        config.warmup_ratio,
        trained,
        plans.DecayFlags(config.decay_ratio, config.decay_from_step, config.decay_steps)
        if config.schedule == "wsd"
        else None,
    )
    return global_batch, plan


def _recompile_for(start_step, plan, trainer_model, config, runtime) -> None:
    """Steps per call that divide this attempt's intervals (an earlier attempt may have
    used other intervals)."""
    execution = plan.steps_per_execution_from(start_step)
    if execution != plan.steps_per_execution:
        trainer_model.compile(
            optimizer=trainer_model.optimizer,
            jit_compile=runtime.device.jit,
            steps_per_execution=execution * config.grad_accum_steps,
        )


def _check_hosts_agree(runtime, run_files, saved, run_config) -> None:
    """Every process of a pod sees the same run (see `plan.check_hosts_agree`): compared
    before the first collective, which is the restore of the backup."""
    weights = run_files.backups() + run_files.checkpoints()
    newest = max((run_dir.step_of(path) or 0 for path in weights), default=0)
    plans.check_hosts_agree(
        runtime.gather,
        newest,
        {"saved": saved, "now": run_config, "weights": [fs.basename(p) for p in weights]},
    )


def _check_push(config) -> None:
    """With --push_to, credentials must exist (on every host: any may be the chief): fail
    now, not after training."""
    if config.push_target:
        push.check_credentials(config.push_target)


def _published(config, run_files, chief: bool, metrics: dict) -> dict:
    """With --push_to, the chief exports the run it just finished (with its model card) to
    {output_dir}/export/ and pushes it; returns `metrics` unchanged. (A rerun of a finished
    run pushes nothing: `python -m trainer.export --checkpoint OUTPUT_DIR --push_to ...`.)"""
    if chief and config.push_to:
        _, pushed = export.export_and_push(run_files.root, run_files.export_dir, "all", config)
        for fmt, where in pushed.items():
            print(f"pushed the {fmt} export to {where}")
    return metrics


def _callbacks(config, runtime, masked_lm, plan, run_files, guards_and_log) -> list:
    """The run's callbacks in their order: the non-finite stop first (a NaN interval
    reaches none of the writers), the guards and the log, the writers, then the
    preemption stop (a stop at an interval end follows the writers)."""
    chief = runtime.chief
    callbacks = [
        cb.StopOnNonFiniteLoss(),
        cb.DeterministicDropout(config.seed),
        *guards_and_log,
        cb.StepCheckpoints(
            run_files,
            masked_lm,
            config.save_every,
            plan.total_steps,
            config.keep_checkpoints,
            chief=chief,
        ),
        cb.StateBackup(run_files, config.save_every, plan.total_steps, chief=chief),
    ]
    if runtime.preemption_sync:
        callbacks.append(
            cb.PreemptionSync(
                runtime.preemption_sync, run_files, config.save_every, plan.total_steps, chief
            )
        )
    return callbacks


def _fit(
    config,
    runtime,
    trainer_model,
    masked_lm,
    plan,
    start_step,
    run_files,
    inputs,
    global_batch,
    guards,
    extra_callbacks,
):
    """Runs the `fit` calls of `plan.segments`; returns the TrainingLog. `guards` run at an
    interval end before anything of it is written."""
    log = cb.TrainingLog(
        run_files, global_batch, cb.read_history(run_files.history, start_step), chief=runtime.chief
    )
    callbacks = _callbacks(config, runtime, masked_lm, plan, run_files, [*guards, log])
    callbacks.extend(extra_callbacks)
    batch_size = runtime.pipeline_batch_size(config.per_replica_batch_size)
    eval_batches = runtime.distribute(
        data.eval_dataset_fn(inputs.eval, batch_size, config.max_eval_batches)
    )
    eval_steps = _eval_steps(config, runtime, inputs)
    micro = config.grad_accum_steps
    for first_step, intervals, length in plan.segments(start_step):
        train_batches = runtime.distribute(
            data.train_dataset_fn(
                inputs.train,
                batch_size,
                config.seed,
                first_step - inputs.data_start_step,
                config.shuffle_buffer_size,
                micro,
            )
        )
        trainer_model.fit(
            train_batches,
            epochs=intervals,
            steps_per_epoch=length * micro,
            validation_data=eval_batches,
            validation_steps=eval_steps,
            validation_freq=plan.eval_epochs(first_step, intervals, length),
            callbacks=callbacks,
            verbose=config.verbose,
            shuffle=False,
        )  # data_order shuffles; Keras would warn it cannot
    return log


def finished_metrics(run_files, total_steps: int, global_batch: int, chief: bool, evaluate) -> dict:
    """metrics.json of a run whose backup is at the total. Rebuilt from history.json if a kill
    came between the last backup and its writing, or if the total was lowered to the backed-up
    step: then that step may never have been evaluated, and `evaluate()` is run first."""
    if fs.exists(run_files.metrics):
        print(f"{run_files.root} already finished {total_steps} steps; nothing to do.")
        return fs.read_json(run_files.metrics)
    history = cb.read_history(run_files.history, total_steps)
    if not history or history[-1]["step"] != total_steps:
        raise RunConfigError(
            f"{run_files.history} has no entry for step {total_steps}, the "
            "backed-up step; pass a larger --train_steps to go on training."
        )
    if "eval_loss" in history[-1]:
        print(f"{run_files.root} already finished {total_steps} steps; nothing to do.")
    else:
        print(
            f"{run_files.root} already trained {total_steps} steps, the new --train_steps; "
            "evaluating the last step to finish the run."
        )
        history[-1].update(evaluate())
        if chief:
            fs.write_json(run_files.history, history)
    metrics = final_metrics(
        history, [e["examples_per_second"] for e in history], total_steps, global_batch
    )
    if chief:
        fs.write_json(run_files.metrics, metrics)
    return metrics


def _evaluate(config, runtime, trainer_model, inputs) -> dict:
    """The restored model on the evaluation split, as `fit` evaluates it (eval_* names)."""
    batches = runtime.distribute(
        data.eval_dataset_fn(
            inputs.eval,
            runtime.pipeline_batch_size(config.per_replica_batch_size),
            config.max_eval_batches,
        )
    )
    with data.replaced_splits_named(inputs.train, inputs.eval):
        logs = trainer_model.evaluate(
            batches, steps=_eval_steps(config, runtime, inputs), verbose=0, return_dict=True
        )
    return {"eval_" + name: float(value) for name, value in logs.items()}


def _eval_steps(config, runtime, inputs) -> int | None:
    """Keras counts a tf.data pass itself (its cardinality is asserted); a grain one it cannot."""
    if runtime.backend != "jax":
        return None
    share = data.PipelineShare(runtime.pipeline_id, runtime.num_pipelines, runtime.batches_per_step)
    batch_size = runtime.pipeline_batch_size(config.per_replica_batch_size)
    return data.eval_steps(inputs.eval, batch_size, config.max_eval_batches, share)


def final_metrics(history: list, rates: list, steps: int, global_batch: int) -> dict:
    """The last evaluation, the last training interval, and the steady examples/s (the first
    interval of a process includes compilation, so it is left out when there are others)."""
    last_eval = next(e for e in reversed(history) if "eval_loss" in e)
    last = history[-1]
    steady = rates[1:] or rates
    return {
        "eval_loss": last_eval["eval_loss"],
        "eval_accuracy": last_eval["eval_accuracy"],
        "eval_perplexity": last_eval["eval_perplexity"],
        "train_loss": last["loss"],
        "train_accuracy": last["accuracy"],
        "train_perplexity": last["perplexity"],
        "steps": steps,
        "examples": steps * global_batch,
        "examples_per_second": sum(steady) / len(steady),
    }


def main(argv=None) -> int:
    """Entry point; bad data, tokenizer or device is one line on stderr and exit status 2."""
    config = parse_args(argv)

    def body():
        metrics = run(config)
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})

    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
