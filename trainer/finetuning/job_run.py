"""One fine-tuning job (a task of one's own files, or one GLUE task): its data packed, every
seed fine-tuned on the run's devices (`protocol.run_seed`), its results document built and,
by the chief, written with the best seed as a transformers folder (`best_export`); a pod's
hosts first check that they fine-tune the same thing.

Example:
    >>> document = run_job(runtime, source, backbone, pretrained, job, watch=watch)
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from common.errors import Terminated, UserError
from trainer.finetuning import (
    auto_rate,
    best_export,
    divergence,
    interruption,
    jobs,
    protocol,
    recipes,
    results,
)
from trainer.tasks import unscored
from trainer.training import hosts


def run_job(
    runtime, source, backbone, pretrained: dict, job: jobs.Job, after_seed=None, watch=None
) -> dict:
    """Fine-tunes every seed of one job on `runtime`'s devices; returns its results document,
    written by the chief (process 0 of a JAX pod; the others compute the same and write
    nothing). At a SIGTERM (`watch`) the chief writes the complete seeds' results, marked
    interrupted, and `Terminated` ends the command."""
    from trainer.finetuning.classifier import jit_default

    data, counts, info = jobs.pack_task(source, job)
    backbone.check_tokenizer(info)
    check_hosts_agree(runtime, job.settings.flags, data)
    export = best_export.BestSeed(source, info, job, counts["train"]["max_length"])
    for line in export.notes():  # before training: a user may rather rerun with --pooling cls
        say(runtime, line)
    jit = jit_default(job.settings.jit_compile, runtime.device.jit)
    sweep = None
    if isinstance(job.recipe.learning_rate, recipes.Auto):
        recipe, sweep = auto_rate.choose(
            backbone, data, job, jit, runtime, lambda t: say(runtime, t)
        )
        job = dataclasses.replace(job, recipe=recipe)  # the seeds run at the chosen rate
    models = protocol.SeedModels(backbone, data, job.recipe, jit, runtime)
    scalars = results.Scalars(job.output_dir) if runtime.chief else None
    records = []
    document = results_document(source, backbone, job, counts)
    document["learning_rate_sweep"] = sweep
    try:
        for seed in job.seeds:
            record = protocol.run_seed(models, seed, scalars, watch)
            if "test_predictions" in record:  # an unlabelled test split: written, not scored
                _write_predictions(runtime, job, record)
            say(runtime, seed_line(job, record))
            records.append(record)
            if after_seed:
                after_seed(record, models.model)
            export.offer(record, models.model)
    except interruption.Interrupted as stop:
        path = None
        if records:  # what is complete: written, marked interrupted
            _add_scores(document, models, data, records, pretrained)
            document["interrupted"] = f"{stop}; complete: seed(s) {[r['seed'] for r in records]}"
            path = (
                results.write(job.output_dir, document)
                if runtime.chief
                else "process 0's results.json"
            )
        raise Terminated(interruption.ended(stop, job.name, len(records), path)) from None
    _add_scores(document, models, data, records, pretrained)
    export.finish(runtime, models.model, document)
    if runtime.chief:
        results.write(job.output_dir, document)
    return document


def _write_predictions(runtime, job: jobs.Job, record: dict) -> None:
    """The unlabelled test split's predictions as files (`unscored`); the record names them."""
    predicted = record.pop("test_predictions")
    record["test_predictions"] = unscored.write(
        job.output_dir, record["seed"], job.splits["test"], job.names, predicted, runtime.chief
    )


def seed_line(job: jobs.Job, record: dict) -> str:
    if record.get("diverged"):
        return divergence.line(job.name, record["seed"], record["diverged"])
    metric = job.recipe.metric
    return (
        f"{job.name} seed {record['seed']}: best epoch {record['best_epoch']}, dev {metric} "
        f"{results.number(record['dev'][metric])} ({record['seconds']:.1f} s)"
    )


def _add_scores(document: dict, models, data, records: list, pretrained: dict) -> None:
    from trainer import backends

    metric = models.recipe.metric
    constant = protocol.constant_scores(data)
    # Read from the model: the devices it was really built and trained on.
    document["protocol"]["replicas"] = backends.model_replicas(models.model)
    document["protocol"]["processes"] = models.devices.processes
    # What the devices decided (`trainer.backends.devices.device_settings`), not the flags' "auto".
    document["protocol"]["precision"] = models.precision
    document["protocol"]["fused_attention"] = models.fused_attention
    document["pretraining"] = pretrained
    document["scores"] = {
        "metric": metric,
        "seeds": records,
        "constant_answer_dev": constant,
        "summary": protocol.summarise(records, metric, constant),
    }


def say(runtime, text: str) -> None:
    """Prints on the chief only: a pod's hosts would print the same lines once each."""
    if runtime.chief:
        print(text, flush=True)


# Flags that name where the chief writes: the other processes of a pod never use them.
_WRITES_ONLY = ("output_dir", "card")


def check_hosts_agree(runtime, flags: dict, data: protocol.TaskData) -> None:
    """On a JAX pod every process must fine-tune the same examples with the same flags (`flags`:
    every flag as parsed, `jobs.Settings.flags`): each trains on its share of the same global
    batches, and processes that disagree would call different collectives (one waits for
    ever) or score other examples. Compared before the first collective of the training: the
    packed arrays and the flags, but not where the chief writes."""
    fingerprint = hashlib.sha256()
    for split in (data.train, data.dev, data.test):
        features, targets = split if split is not None else ({}, None)
        targets = np.zeros(0) if targets is None else targets  # absent, or unlabelled
        for name in sorted(features):
            fingerprint.update(name.encode() + np.ascontiguousarray(features[name]).tobytes())
        fingerprint.update(np.ascontiguousarray(targets).tobytes())
    chosen = {k: v for k, v in flags.items() if k not in _WRITES_ONLY}
    seen = hosts.disagreement(runtime.gather, [hosts.digest([chosen, fingerprint.hexdigest()])])
    if seen is not None:
        said = ", ".join(f"host {i} {value:07x}" for i, (value,) in enumerate(seen))
        raise UserError(
            f"the pod's hosts fine-tune different data or flags (digests: {said}): every "
            "host must read the same files and run the same command"
        )


def results_document(source, backbone, job: jobs.Job, counts: dict) -> dict:
    """results.json before its scores: the protocol, the model, the task and its data."""
    return {
        "protocol": {
            **results.protocol_facts(job, counts["train"]["max_length"]),
            "pooling": job.settings.pooling,
            "notes": results.PROTOCOL_NOTES,
            "optimizer": "AdamW beta (0.9, 0.98), eps 1e-6, "
            "global norm clip 1.0, linear warmup then linear decay to 0",
        },
        "model": results.model_facts(source, backbone, job),
        "task": {
            "name": job.name,
            "type": job.task_type,
            "labels": list(job.names) if job.names else None,
            "pair": jobs.is_pair(job),
            **job.extra,
        },
        "data": counts,
        "dataset": job.dataset,
    }
