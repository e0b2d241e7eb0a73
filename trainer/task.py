"""Command line: pretrain a masked language model on prepared shards.

    python -m trainer.task --train_data gs://b/data/train --eval_data gs://b/data/validation \\
        --tokenizer gs://b/tokenizer --output_dir gs://b/runs/r1 --model base \\
        --strategy tpu --tpu local --per_replica_batch_size 32 --train_steps 100000

Rerunning the same command after a preemption resumes at the last backed-up step. Output
layout (the contract with trainer/export.py): run_config.json, tokenizer/,
checkpoints/ckpt-{step:08d}.weights.h5, backup/, logs/, history.json, metrics.json.
"""

from __future__ import annotations

import sys

from common.errors import UserError, run_cli
from trainer.config import TrainConfig, parse_args


class RunConfigError(UserError):
    """output_dir holds a run that the current flags cannot continue."""


def write_run_files(run, run_config: dict, tokenizer_dir: str) -> None:
    """run_config.json (atomically) and a copy of the tokenizer files."""
    from common import fs, tokenizer_files

    fs.write_json(run.run_config, run_config)
    tokenizer_files.copy(tokenizer_dir, run.tokenizer_dir)


def remove_orphans(run) -> None:
    """Temporary files of writes that a kill interrupted (local folders only: an object
    upload leaves none). Only one process writes a run folder, so none of these is live."""
    from common import fs

    if not fs.is_remote(run.root):
        fs.delete(fs.glob_in(run.root, "*/.tmp-*") + fs.glob_in(run.root, ".tmp-*"))


def tokenizer_of(train_data: str) -> str:
    """The tokenizer folder recorded in the training split's manifest (prepare writes it)."""
    from common import fs, manifest

    if not fs.exists(manifest.manifest_path_of(train_data.rstrip("/"))):
        raise RunConfigError(f"{train_data} has no manifest naming its tokenizer (legacy-format "
                             "shards?); pass --tokenizer.")
    path = manifest.read_manifest(train_data, check_shards=False).tokenizer.get("path")
    if not path:
        raise RunConfigError(f"{train_data} does not name its tokenizer; pass --tokenizer.")
    return path


def _inputs(config: TrainConfig):
    """Tokenizer info and the validated train/eval splits."""
    from common import tokenizer_files
    from trainer import data

    config.tokenizer = config.tokenizer or tokenizer_of(config.train_data)
    _, info = tokenizer_files.load(config.tokenizer)  # a bad folder: one-line UserError
    train_source = data.resolve_split(config.train_data, info, config.max_length)
    eval_source = data.resolve_split(config.eval_data, info, train_source.max_length)
    return info, train_source, eval_source


def _build(config, strategy, spec, backbone, plan, device):
    """The compiled trainer model with a built optimizer (ready for `restore_state`)."""
    import keras

    from trainer import model, quiet
    from trainer.optimization import build_optimizer
    from trainer.train_step import MaskedLMTrainer

    keras.mixed_precision.set_dtype_policy(
        "mixed_bfloat16" if device.precision == "bf16" else "float32")
    with strategy.scope():
        keras.utils.set_random_seed(config.seed)
        masked_lm = model.build_masked_lm(config.family, backbone)
        trainer_model = MaskedLMTrainer(masked_lm, spec, seed=config.seed,
                                        eval_seed=config.eval_seed,
                                        xla_masking=device.xla_masking)
        length = backbone["max_sequence_length"]
        dummy = {"input_ids": keras.ops.ones((1, length), "int32"),
                 "attention_mask": keras.ops.ones((1, length), "int32")}
        with quiet.harmless_lines_hidden():
            trainer_model(dummy)  # build the weights (eagerly)
        optimizer = build_optimizer(
            config.learning_rate, plan.total_steps, plan.warmup_steps, config.weight_decay,
            config.adam_beta1, config.adam_beta2, config.adam_epsilon, config.clip_norm)
        trainer_model.compile(optimizer=optimizer, jit_compile=device.jit,
                              steps_per_execution=plan.steps_per_execution)
        optimizer.build(trainer_model.trainable_variables)  # so a backup can load into it
    return trainer_model, masked_lm


def _masking_spec(config, info):
    from common import tokenizer_files
    from trainer.masking import MaskingSpec

    word_starts = ()
    if config.masking == "whole_word":
        tokenizer, _ = tokenizer_files.load(config.tokenizer)
        word_starts = tuple(tokenizer_files.word_starts(tokenizer))
    return MaskingSpec(info.vocab_size, info.mask_id, tuple(info.all_special_ids),
                       rate=config.mlm_probability, masking=config.masking,
                       word_starts=word_starts)


def run(config: TrainConfig, extra_callbacks=()) -> dict:
    """Trains (or resumes) as `config` says; returns the final metrics."""
    from common import fs
    from trainer import checkpoints, data, model, plan as plans, strategy as strategies
    from trainer.run_dir import RunDir

    run_files = RunDir(config.output_dir)
    info, train_source, eval_source = _inputs(config)
    max_length = train_source.max_length
    strategy = strategies.select_strategy(config.strategy, config.tpu, config.tpu_zone,
                                          config.gcp_project, config.cpu_replicas,
                                          config.no_tpu)
    chief = strategies.is_chief(strategy)
    device = plans.device_settings(
        config.precision, config.jit_compile, config.steps_per_execution,
        strategies.is_tpu(strategy), strategies.runs_on_cpu_replicas(strategy),
        strategies.cpu_without_xla(strategy))
    replicas = strategy.num_replicas_in_sync
    global_batch = config.per_replica_batch_size * replicas
    total_steps = config.train_steps or config.epochs * (train_source.num_examples // global_batch)
    if total_steps < 1:
        raise data.ManifestError(f"{config.train_data} holds fewer examples than one global "
                                 f"batch of {global_batch}.")
    saved = fs.read_json(run_files.run_config) if fs.exists(run_files.run_config) else None
    config.learning_rate = plans.learning_rate(config.learning_rate, config.model, saved)
    plan = plans.make_plan(total_steps, config.save_every, config.eval_every,
                           device.steps_per_execution, config.warmup_ratio, saved)
    backbone = model.backbone_config(config.family, config.model, info.vocab_size, max_length,
                                     config.config)
    run_config = {**config.to_dict(), "family": config.family, "size": config.model,
                  "backbone_config": backbone, "max_length": max_length,
                  "tokenizer": info.to_dict(), "seed": config.seed,
                  "precision": device.precision,
                  "total_steps": total_steps, "warmup_steps": plan.warmup_steps,
                  "global_batch_size": global_batch, "replicas": replicas,
                  "input_pipelines": strategies.num_input_pipelines(strategy),
                  "train_data_digest": train_source.digest, "jit_compile": device.jit}
    plans.check_continuation(saved, run_config, run_files.root)
    spec = _masking_spec(config, info)
    trainer_model, masked_lm = _build(config, strategy, spec, backbone, plan, device)
    start_step = checkpoints.restore_state(run_files, trainer_model, masked_lm)
    plans.check_start(start_step, total_steps, run_files.root)
    if chief:  # only once every check passed: a refused command changes no file
        remove_orphans(run_files)
        write_run_files(run_files, run_config, config.tokenizer)
    if start_step == total_steps:
        print(f"{run_files.root} already finished {total_steps} steps; nothing to do.")
        return finished_metrics(run_files, global_batch, chief)
    execution = plan.steps_per_execution_from(start_step)
    if execution != plan.steps_per_execution:  # an earlier attempt used other intervals
        trainer_model.compile(optimizer=trainer_model.optimizer, jit_compile=device.jit,
                              steps_per_execution=execution)
    log = _fit(config, strategy, trainer_model, masked_lm, plan, start_step, run_files,
               train_source, eval_source, global_batch, chief, extra_callbacks)
    # The optimizer's own count, not the configured total: what the weights really saw.
    steps_done = int(trainer_model.optimizer.iterations.numpy())
    metrics = final_metrics(log.history, log.rates, steps_done, global_batch)
    if chief:
        fs.write_json(run_files.metrics, metrics)
    return metrics


def _fit(config, strategy, trainer_model, masked_lm, plan, start_step, run_files,
         train_source, eval_source, global_batch, chief, extra_callbacks):
    """Runs the `fit` calls of `plan.segments`; returns the TrainingLog."""
    from trainer import callbacks as cb
    from trainer import data

    log = cb.TrainingLog(run_files, global_batch,
                         cb.read_history(run_files.history, start_step), chief=chief)
    callbacks = [
        cb.DeterministicDropout(config.seed),
        log,
        cb.StepCheckpoints(run_files, masked_lm, config.save_every, plan.total_steps,
                           config.keep_checkpoints, chief=chief),
        cb.StateBackup(run_files, config.save_every, plan.total_steps, chief=chief),
        *extra_callbacks,
    ]
    eval_batches = data.distribute(strategy, data.eval_dataset_fn(
        eval_source, config.per_replica_batch_size, config.max_eval_batches))
    for first_step, intervals, length in plan.segments(start_step):
        train_batches = data.distribute(strategy, data.train_dataset_fn(
            train_source, config.per_replica_batch_size, config.seed, first_step,
            config.shuffle_buffer_size))
        trainer_model.fit(train_batches, epochs=intervals, steps_per_epoch=length,
                          validation_data=eval_batches,
                          validation_freq=plan.eval_epochs(first_step, intervals, length),
                          callbacks=callbacks, verbose=config.verbose,
                          shuffle=False)  # tf.data shuffles; Keras would warn it cannot
    return log


def finished_metrics(run_files, global_batch: int, chief: bool) -> dict:
    """metrics.json of a finished run, rebuilt from history.json if a kill came between the
    last backup and its writing."""
    from common import fs
    from trainer import callbacks as cb

    if fs.exists(run_files.metrics):
        return fs.read_json(run_files.metrics)
    history = cb.read_history(run_files.history, 2**62)
    steps = history[-1]["step"]
    metrics = final_metrics(history, [e["examples_per_second"] for e in history], steps,
                            global_batch)
    if chief:
        fs.write_json(run_files.metrics, metrics)
    return metrics


def final_metrics(history: list, rates: list, steps: int, global_batch: int) -> dict:
    """The last evaluation, the last training interval, and the steady examples/s (the first
    interval of a process includes compilation, so it is left out when there are others)."""
    last_eval = next(e for e in reversed(history) if "eval_loss" in e)
    last = history[-1]
    steady = rates[1:] or rates
    return {
        "eval_loss": last_eval["eval_loss"], "eval_accuracy": last_eval["eval_accuracy"],
        "eval_perplexity": last_eval["eval_perplexity"], "train_loss": last["loss"],
        "train_accuracy": last["accuracy"], "train_perplexity": last["perplexity"],
        "steps": steps, "examples": steps * global_batch,
        "examples_per_second": sum(steady) / len(steady),
    }


def main(argv=None) -> int:
    """Entry point; bad data, tokenizer or device is one line on stderr and exit status 2."""
    config = parse_args(argv)

    def body():
        metrics = run(config)
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})
    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
