"""Command line: pretrain a masked language model on prepared shards.

    python -m trainer.task --train_data gs://b/data/train --eval_data gs://b/data/validation \\
        --tokenizer gs://b/tokenizer --output_dir gs://b/runs/r1 --model base \\
        --strategy tpu --tpu local --per_replica_batch_size 32 --train_steps 100000

The same flags run on TensorFlow or JAX (`--backend`, or KERAS_BACKEND; trainer/backends/ holds
all that differs). Rerunning the same command after a preemption resumes at the last
backed-up step. Output
layout (the contract with trainer/release/export.py): run_config.json, tokenizer/,
checkpoints/ckpt-{step:08d}.weights.h5, backup/, logs/, history.json, metrics.json.
"""

from __future__ import annotations

import dataclasses

import keras

from common import fs, schema
from common.errors import run_cli
from common.publish import PushFlags
from trainer import backends
from trainer.backends.devices import DeviceRequest
from trainer.data import read_errors
from trainer.data import splits as data
from trainer.models import checkpoints, init_from, model
from trainer.models.checkpoints import update_count
from trainer.pretraining import callbacks as cb
from trainer.pretraining import phases, run_setup
from trainer.pretraining import plan as plans
from trainer.pretraining.config import TrainConfig, parse_args
from trainer.pretraining.train_step import MaskedLMTrainer
from trainer.release import export
from trainer.run_folder import attempts, folder_lock
from trainer.run_folder.run_dir import RunDir
from trainer.run_folder.run_record import RunRecord
from trainer.startup import quiet
from trainer.training.optimizer import AdamWSettings, build_optimizer


@dataclasses.dataclass(frozen=True)
class Run:
    """The objects of one attempt, made once by `_train` and handed whole to what trains it."""

    config: TrainConfig
    runtime: object  # trainer.backends.runtime.Runtime
    files: RunDir
    inputs: run_setup.Inputs
    plan: plans.TrainPlan
    global_batch: int
    trainer_model: MaskedLMTrainer
    masked_lm: keras.Model
    run_config: dict  # as written at the start; --phases marks when each phase is reached


def _build(config, family, runtime, spec, backbone, plan):
    """The compiled trainer model with a built optimizer (ready for `restore_state`)."""
    keras.mixed_precision.set_dtype_policy(model.dtype_policy(runtime.device.precision))
    with runtime.scope():
        keras.utils.set_random_seed(config.run.seed)
        masked_lm = model.build_masked_lm(family, backbone)
        model.bf16_lm_head(masked_lm)  # a no-op in float32
        if runtime.device.fused_attention:
            model.fuse_attention(masked_lm)
        trainer_model = MaskedLMTrainer(
            masked_lm, spec, seed=config.run.seed, eval_seed=config.run.eval_seed
        )
        length = family.build_length(backbone)
        dummy = {name: keras.ops.ones((1, length), "int32") for name in schema.FEATURES}
        with quiet.harmless_lines_hidden():
            trainer_model(dummy)  # build the weights (eagerly)
        optimizer = build_optimizer(
            config.schedule.learning_rate,
            plan.total_steps,
            plan.warmup_steps,
            AdamWSettings.of(config.optimizer),
            config.batch.grad_accum_steps,
            plan.decay,
        )
        trainer_model.compile(
            optimizer=optimizer,
            jit_compile=runtime.device.jit,
            steps_per_execution=plan.steps_per_execution * config.batch.grad_accum_steps,
        )
        optimizer.build(trainer_model.trainable_variables)  # so a backup can load into it
    return trainer_model, masked_lm


def run(config: TrainConfig, extra_callbacks=()) -> dict:
    """Trains (or resumes) as `config` says; returns the final metrics. The chief holds the
    run folder's lock from before it reads the saved run until it returns."""
    with backends.errors_end_pod_processes():
        execution = config.execution
        run_setup.check_backend(execution.backend)
        runtime = backends.setup(
            DeviceRequest.of(config.device, execution.jit_compile, execution.steps_per_execution)
        )
        with folder_lock.held(config.lock, config.data.output_dir, runtime.chief) as lock:
            return _train(config, runtime, lock, extra_callbacks)


def _train(config: TrainConfig, runtime, lock, extra_callbacks) -> dict:
    run_files = RunDir(config.data.output_dir)
    saved = RunRecord.read(run_files.run_config) if fs.exists(run_files.run_config) else None
    # The saved plan binds only a run that has trained: a start killed before its first
    # backup is planned afresh from today's flags (warmup, default learning rate).
    trained = saved if checkpoints.has_trained(run_files) else None
    config, family, initial = run_setup.resolved(config, trained)
    run_setup.check_push(config.push)
    inputs = run_setup.load_inputs(config.data)
    global_batch, plan = run_setup.plan_of(config, runtime, inputs, trained)
    total_steps = plan.total_steps
    backbone = run_setup.backbone_of(config, family, inputs, initial)
    run_config = run_setup.run_config_of(
        config, runtime, inputs, plan, backbone, global_batch, initial
    )
    # Compared before the first collective, which is the restore of the backup.
    plans.check_hosts_agree(
        runtime.gather, run_files.backups() + run_files.checkpoints(), saved, run_config
    )
    extend_context = config.schedule.extend_context
    run_setup.check_continuation(extend_context, family, saved, trained, run_config, run_files.root)
    trainer_model, masked_lm = _build(
        config, family, runtime, run_setup.masking_spec(config.masking, inputs), backbone, plan
    )
    start_step = checkpoints.restore_state(run_files, trainer_model, masked_lm)
    if initial is not None and start_step == 0:  # a restart resumes the run, not the model
        init_from.load_into(masked_lm, initial)
    run_setup.check_resume(saved, plan, start_step, run_files.root, config.schedule.decay_from_step)
    inputs = run_setup.data_start(extend_context, family, saved, run_config, start_step, inputs)
    run = Run(
        config, runtime, run_files, inputs, plan, global_batch, trainer_model, masked_lm, run_config
    )
    if runtime.chief:  # only once every check passed: a refused command changes no file
        run_setup.remove_orphans(run_files)
        earlier = saved.raw if saved else None
        run_config["attempts"] = attempts.history(earlier, run_config, start_step)
        run_setup.write_run_files(run_files, run_config, family, config.data.tokenizer)
    if replanned := plans.warmup_change(trained, plan):
        print(replanned)
    if start_step == total_steps:
        return finished_metrics(
            run_files,
            total_steps,
            global_batch,
            runtime.chief,
            lambda: _evaluate(run),
        )
    _recompile_for(run, start_step)
    read = {p.source.split_dir: p.source for p in inputs.phases[1:]}  # --phases' folders too
    with read_errors.replaced_splits_named(inputs.train, inputs.eval, *read.values()):
        log = _fit(run, start_step, [folder_lock.LockKept(lock)], extra_callbacks)
    # The optimizer's own count, not the configured total: what the weights really saw.
    steps_done = update_count(trainer_model.optimizer)
    metrics = final_metrics(log.history, log.rates, steps_done, global_batch)
    if runtime.chief:
        fs.write_json(run_files.metrics, metrics)
    return _published(config.push, run_files, runtime.chief, metrics)


def _recompile_for(run: Run, start_step: int) -> None:
    """Steps per call that divide this attempt's intervals (an earlier attempt may have
    used other intervals)."""
    execution = run.plan.steps_per_execution_from(start_step)
    if execution != run.plan.steps_per_execution:
        run.trainer_model.compile(
            optimizer=run.trainer_model.optimizer,
            jit_compile=run.runtime.device.jit,
            steps_per_execution=execution * run.config.batch.grad_accum_steps,
        )


def _published(push_flags: PushFlags, run_files, chief: bool, metrics: dict) -> dict:
    """With --push_to, the chief exports the run it just finished (with its model card) to
    {output_dir}/export/ and pushes it; returns `metrics` unchanged. (A rerun of a finished
    run pushes nothing: `python -m trainer.export --checkpoint OUTPUT_DIR --push_to ...`.)"""
    if chief and push_flags.push_to:
        _, pushed = export.export_and_push(run_files.root, run_files.export_dir, "all", push_flags)
        for fmt, where in pushed.items():
            print(f"pushed the {fmt} export to {where}")
    return metrics


def _callbacks(run: Run, guards_and_log) -> list:
    """The run's callbacks in their order: the non-finite stop first (a NaN interval
    reaches none of the writers), the guards and the log, the writers, then the
    preemption stop (a stop at an interval end follows the writers)."""
    flags, runtime, plan, run_files = run.config.run, run.runtime, run.plan, run.files
    chief, masked_lm = runtime.chief, run.masked_lm
    callbacks = [
        cb.StopOnNonFiniteLoss(),
        cb.DeterministicDropout(flags.seed),
        *guards_and_log,
        cb.StepCheckpoints(
            run_files,
            masked_lm,
            flags.save_every,
            plan.total_steps,
            flags.keep_checkpoints,
            chief=chief,
        ),
        cb.StateBackup(run_files, flags.save_every, plan.total_steps, chief=chief),
    ]
    if runtime.preemption_sync:
        callbacks.append(
            cb.PreemptionSync(
                runtime.preemption_sync, run_files, flags.save_every, plan.total_steps, chief
            )
        )
    return callbacks


def _fit(run: Run, start_step: int, guards, extra_callbacks):
    """Runs the `fit` calls of `plan.segments`; returns the TrainingLog. `guards` run at an
    interval end before anything of it is written."""
    config, runtime, plan, inputs = run.config, run.runtime, run.plan, run.inputs
    log = cb.TrainingLog(
        run.files,
        run.global_batch,
        cb.read_history(run.files.history, start_step),
        runtime.chief,
        phase_of=_phase_number(inputs.phases),
    )
    callbacks = _callbacks(run, [*guards, log])
    callbacks.extend(extra_callbacks)
    batch_size = runtime.pipeline_batch_size(config.batch.per_replica_batch_size)
    eval_batches = runtime.distribute(
        data.eval_dataset_fn(inputs.eval, batch_size, config.run.max_eval_batches)
    )
    eval_steps = _eval_steps(run)
    micro = config.batch.grad_accum_steps
    phase = None
    for first_step, intervals, length in plan.segments(start_step):
        phase = _enter_phase(run, first_step, phase)
        train_batches = runtime.distribute(
            data.train_dataset_fn(
                phase.source,
                batch_size,
                config.run.seed,
                first_step,
                config.run.shuffle_buffer_size,
                micro,
                phase.data_start_step,
            )
        )
        run.trainer_model.fit(
            train_batches,
            epochs=intervals,
            steps_per_epoch=length * micro,
            validation_data=eval_batches,
            validation_steps=eval_steps,
            validation_freq=plan.eval_epochs(first_step, intervals, length),
            callbacks=callbacks,
            verbose=config.run.verbose,
            shuffle=False,
        )  # data_order shuffles; Keras would warn it cannot
    return log


def _phase_number(run_phases: tuple):
    """The history's phase of an interval ending at a step (None for a run of one phase)."""
    if len(run_phases) < 2:
        return None
    return lambda step: phases.at(run_phases, step - 1).number


def _enter_phase(run: Run, step: int, previous):
    """The phase that trains from `step` (a `fit` call never spans two), its masking rate
    set; said in one line when it begins (or an attempt resumes in it), and at its start
    step recorded in run_config.json as reached."""
    phase = phases.at(run.inputs.phases, step)
    run.trainer_model.use_rate(phase.rate)
    if phase != previous and phase.number:
        print(phases.said(phase))
        if step == phase.start_step and run.runtime.chief:
            phases.mark_reached(run.run_config["data_phases"], phase.number)
            RunRecord.from_dict(run.run_config).write(run.files.run_config)
    return phase


def finished_metrics(run_files, total_steps: int, global_batch: int, chief: bool, evaluate) -> dict:
    """metrics.json of a run whose backup is at the total. Rebuilt from history.json if a kill
    came between the last backup and its writing, or if the total was lowered to the backed-up
    step: then that step may never have been evaluated, and `evaluate()` is run first."""
    if fs.exists(run_files.metrics):
        print(f"{run_files.root} already finished {total_steps} steps; nothing to do.")
        return fs.read_json(run_files.metrics)
    history = cb.read_history(run_files.history, total_steps)
    if not history or history[-1]["step"] != total_steps:
        raise run_setup.RunConfigError(
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


def _evaluate(run: Run) -> dict:
    """The restored model on the evaluation split, as `fit` evaluates it (eval_* names)."""
    config, runtime, inputs = run.config, run.runtime, run.inputs
    batches = runtime.distribute(
        data.eval_dataset_fn(
            inputs.eval,
            runtime.pipeline_batch_size(config.batch.per_replica_batch_size),
            config.run.max_eval_batches,
        )
    )
    with read_errors.replaced_splits_named(inputs.train, inputs.eval):
        logs = run.trainer_model.evaluate(
            batches, steps=_eval_steps(run), verbose=0, return_dict=True
        )
    return {"eval_" + name: float(value) for name, value in logs.items()}


def _eval_steps(run: Run) -> int | None:
    """Keras counts a tf.data pass itself (its cardinality is asserted); a grain one it cannot."""
    config, runtime, inputs = run.config, run.runtime, run.inputs
    if runtime.backend != "jax":
        return None
    share = data.PipelineShare(runtime.pipeline_id, runtime.num_pipelines, runtime.batches_per_step)
    batch_size = runtime.pipeline_batch_size(config.batch.per_replica_batch_size)
    return data.eval_steps(inputs.eval, batch_size, config.run.max_eval_batches, share)


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
