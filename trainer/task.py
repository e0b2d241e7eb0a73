"""Command line: pretrain a masked language model on prepared shards.

    python -m trainer.task --train_data gs://b/data/train --eval_data gs://b/data/validation \\
        --tokenizer gs://b/tokenizer --output_dir gs://b/runs/r1 --model base \\
        --strategy tpu --tpu local --per_replica_batch_size 32 --train_steps 100000

Rerunning the same command after a preemption resumes at the last backed-up step. Output
layout (the contract with trainer/export.py): run_config.json, tokenizer/,
checkpoints/ckpt-{step:08d}.weights.h5, backup/, logs/, history.json, metrics.json.
"""

from __future__ import annotations

import math
import sys

import trainer  # noqa: F401  (sets KERAS_BACKEND before keras is imported)
from trainer.config import TrainConfig, parse_args


class RunConfigError(ValueError):
    """output_dir holds a run that the current flags cannot continue."""


def write_run_files(config: TrainConfig, run_config: dict) -> None:
    """run_config.json and a copy of the tokenizer; refuses to mix two runs in one folder."""
    from common import fs, tokenizer_files

    out = config.output_dir.rstrip("/")
    path = f"{out}/run_config.json"
    if fs.exists(path):
        old = fs.read_json(path)
        for key in ("family", "backbone_config", "max_length", "tokenizer", "seed"):
            if old.get(key) != run_config[key]:
                raise RunConfigError(
                    f"{out} holds a run with another {key} ({old.get(key)!r} there, "
                    f"{run_config[key]!r} now); use a new --output_dir or the same flags.")
    fs.write_json(path, run_config)
    for name in (tokenizer_files.TOKENIZER_JSON, tokenizer_files.TOKENIZER_CONFIG,
                 tokenizer_files.SPECIAL_TOKENS_MAP):
        source = fs.join(config.tokenizer, name)
        if fs.exists(source):
            fs.write_bytes(f"{out}/tokenizer/{name}", fs.read_bytes(source))


def interval_length(*steps: int) -> int:
    """Steps per Keras epoch: every checkpoint, evaluation and the last step fall on an
    interval end (callbacks and validation only run there)."""
    return math.gcd(*steps)


def tokenizer_of(train_data: str) -> str:
    """The tokenizer folder recorded in the training split's manifest (prepare writes it)."""
    from common import fs, manifest

    if not fs.exists(manifest.manifest_path_of(train_data.rstrip("/"))):
        raise RunConfigError(f"{train_data} has no manifest naming its tokenizer (seed-format "
                             "shards?); pass --tokenizer.")
    path = manifest.read_manifest(train_data, check_shards=False).tokenizer.get("path")
    if not path:
        raise RunConfigError(f"{train_data} does not name its tokenizer; pass --tokenizer.")
    return path


def run(config: TrainConfig, extra_callbacks=()) -> dict:
    """Trains (or resumes) as `config` says; returns the final metrics."""
    import keras

    from common import fs, tokenizer_files
    from trainer import callbacks as cb
    from trainer import data, model, strategy as strategies
    from trainer.masking import MaskingSpec
    from trainer.optimization import build_optimizer
    from trainer.train_model import MaskedLMTrainer

    out = config.output_dir.rstrip("/")
    config.tokenizer = config.tokenizer or tokenizer_of(config.train_data)
    try:
        _, info = tokenizer_files.load(config.tokenizer)
    except ValueError as err:  # a tokenizer folder without the special tokens MLM needs
        raise RunConfigError(str(err)) from None
    train_source = data.resolve_split(config.train_data, info, config.max_length)
    max_length = train_source.max_length
    eval_source = data.resolve_split(config.eval_data, info, max_length)

    strategy = strategies.select_strategy(config.strategy, config.tpu, config.tpu_zone,
                                          config.gcp_project, config.cpu_replicas)
    on_tpu = strategies.is_tpu(strategy)
    precision = config.precision or ("bf16" if on_tpu else "fp32")
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16" if precision == "bf16" else "float32")
    replicas = strategy.num_replicas_in_sync
    global_batch = config.per_replica_batch_size * replicas
    total_steps = config.train_steps or config.epochs * (train_source.num_examples // global_batch)
    if total_steps < 1:
        raise data.ManifestError(f"{config.train_data} holds fewer examples than one global "
                                 f"batch of {global_batch}.")
    steps_per_interval = interval_length(config.save_every, config.eval_every, total_steps)
    num_intervals = total_steps // steps_per_interval
    cpu_replicas = strategies.runs_on_cpu_replicas(strategy)
    jit = {"true": True, "false": False, "auto": not cpu_replicas}[config.jit_compile]

    backbone = model.backbone_config(config.family, config.model, info.vocab_size, max_length,
                                     config.config)
    run_config = {**config.to_dict(), "family": config.family, "size": config.model,
                  "backbone_config": backbone, "max_length": max_length,
                  "tokenizer": info.to_dict(), "seed": config.seed, "precision": precision,
                  "total_steps": total_steps, "global_batch_size": global_batch,
                  "replicas": replicas, "jit_compile": jit}
    write_run_files(config, run_config)

    start_step = cb.restored_step(f"{out}/backup", steps_per_interval)
    if start_step >= total_steps:
        print(f"{out} already finished {total_steps} steps; nothing to do.")
        return fs.read_json(f"{out}/metrics.json")

    spec = MaskingSpec(info.vocab_size, info.mask_id, tuple(info.all_special_ids),
                       rate=config.mlm_probability)
    with strategy.scope():
        keras.utils.set_random_seed(config.seed)
        masked_lm = model.build_masked_lm(config.family, backbone)
        trainer_model = MaskedLMTrainer(masked_lm, spec, seed=config.seed,
                                        eval_seed=config.eval_seed,
                                        xla_masking=not jit)  # same masks as a jit step
        dummy = {"input_ids": keras.ops.ones((1, max_length), "int32"),
                 "attention_mask": keras.ops.ones((1, max_length), "int32")}
        trainer_model(dummy)  # build, so BackupAndRestore can load into it
        optimizer = build_optimizer(
            config.learning_rate, total_steps, int(config.warmup_ratio * total_steps),
            config.weight_decay, config.adam_beta1, config.adam_beta2, config.adam_epsilon,
            config.clip_norm)
        steps_per_execution = config.steps_per_execution or (100 if on_tpu else 1)
        trainer_model.compile(optimizer=optimizer, jit_compile=jit,
                              steps_per_execution=min(steps_per_execution, steps_per_interval))

    train_batches = data.distribute(strategy, data.train_dataset_fn(
        train_source, config.per_replica_batch_size, config.seed, start_step,
        config.shuffle_buffer_size))
    eval_batches = data.distribute(strategy, data.eval_dataset_fn(
        eval_source, config.per_replica_batch_size, config.max_eval_batches))
    history_path = f"{out}/history.json"
    log = cb.TrainingLog(history_path, global_batch, cb.read_history(history_path, start_step))
    callbacks = [
        cb.DeterministicDropout(config.seed),
        cb.StepCheckpoints(f"{out}/checkpoints", masked_lm, config.save_every, total_steps,
                           config.keep_checkpoints),
        cb.PeriodicBackupAndRestore(f"{out}/backup", config.save_every, total_steps),
        log,
        keras.callbacks.TensorBoard(f"{out}/logs", update_freq="epoch"),
        *extra_callbacks,
    ]
    eval_intervals = [i for i in range(1, num_intervals + 1)
                      if (i * steps_per_interval) % config.eval_every == 0 or i == num_intervals]
    trainer_model.fit(train_batches, epochs=num_intervals, steps_per_epoch=steps_per_interval,
                      validation_data=eval_batches, validation_freq=eval_intervals,
                      callbacks=callbacks, verbose=config.verbose)
    metrics = final_metrics(log.history, log.rates, total_steps, global_batch)
    fs.write_json(f"{out}/metrics.json", metrics)
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
    from common.manifest import ManifestError
    from trainer.strategy import StrategyError

    try:
        metrics = run(config)
    except (ManifestError, StrategyError, RunConfigError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
