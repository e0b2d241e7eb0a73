"""Fine-tunes a pretrained model on a labelled task and scores it: does pretraining pay off?

    python -m trainer.finetune --model runs/tiny --train train.jsonl --dev dev.jsonl \
        --output_dir finetune/tiny
    python -m trainer.finetune --model runs/tiny --task glue --glue_dir glue_data \
        --output_dir finetune/glue --card exports/tiny

`--model` is anything `trainer.models.model_source.resolve` accepts (a run folder: its newest
checkpoint; one `.weights.h5`; our keras-hub export). The family's keras-hub TextClassifier
is built on its backbone (`--from_scratch`: on random weights, the reference), texts are
tokenized with the model's own tokenizer files and packed the family's way
(`trainer/finetuning/packing.py`), and each of `--seeds` fine-tunes, keeps its best epoch on
dev and scores test (`trainer/finetuning/protocol.py`). `--task` runs GLUE's tasks from their
own layout with their own recipes (`trainer/tasks/glue.py`). The table is printed and
`{output_dir}/results.json` written (per GLUE task `{output_dir}/TASK/results.json`), with
the best seed as a transformers folder, `hf/` beside it (`best_export`);
`--card` adds the scores to an export's model cards; docs/finetuning.md states the protocol.

Example:
    >>> main(["--model", "runs/tiny", "--train", "t.csv", "--dev", "d.csv",
    ...       "--text_column", "sentence", "--output_dir", "out", "--seeds", "1"])
    0
"""

from __future__ import annotations

from common import flags, fs
from common.errors import UserError, run_cli
from trainer.backends.devices import DeviceRequest
from trainer.finetuning import (
    best_export,
    card_scores,
    interruption,
    job_run,
    jobs,
    masked_accuracy,
    output_folder,
    recipes,
    results,
    runners,
)
from trainer.finetuning.config import FinetuneFlags
from trainer.models import model_source
from trainer.run_folder import run_dir
from trainer.startup import keras_backend
from trainer.tasks import glue


def resolve_model(path: str):
    source = model_source.resolve(path)
    if source.tokenizer_dir is None:
        raise model_source.ModelNotFoundError(
            f"{path} has no {run_dir.TOKENIZER_DIR}/ folder: cannot tokenize the text"
        )
    return source


def finetune(config: FinetuneFlags) -> dict | None:
    """Runs the whole protocol; returns the results document (also written and printed;
    for --task glue the summary of every task and the GLUE score), or None on a process of
    a JAX pod other than process 0 (it wrote and printed nothing)."""
    from trainer.finetuning.classifier import PretrainedBackbone
    from trainer.run_folder import folder_lock

    source = resolve_model(config.model)
    size = recipes.model_size(source.record)
    tasks = jobs.build(config, size)  # the flags, resolved once: nothing below reads them
    output_folder.check([job.output_dir for job in tasks])  # before any work: one line
    for job in tasks:
        best_export.check_folder(job)
    cards = card_scores.writable(card_scores.readmes(config.card)) if config.card else []
    runtime = devices(config, tasks)  # before any model: TensorFlow splits an unused CPU only
    lock = folder_lock.held(config, config.output_dir, runtime.chief)
    with lock, interruption.watching(runtime) as watch:
        backbone = PretrainedBackbone(source, config.from_scratch, tasks[0].settings.pooling)
        pretrained = masked_accuracy.pretraining_facts(source)  # before training: fails fast
        if pretrained["warning"] and not config.from_scratch:
            job_run.say(runtime, f"warning: {pretrained['warning']}")
        if runtime.chief:
            output_folder.clear_earlier_run(config.output_dir, [job.output_dir for job in tasks])
        if config.task == "glue":
            document = glue_run(
                runtime, source, backbone, pretrained, tasks, config.mnli_start, watch
            )
            document["protocol"] = {
                "recipe_source": glue.RECIPE_SOURCE,
                "mnli_start": config.mnli_start,
                "glue_dir": config.glue_dir,
                "dataset": None if config.glue_dir else glue.HUB_ID,
            }
            if runtime.chief:
                results.write(config.output_dir, document)
        else:
            loop = (
                runners.of(tasks[0].task_type) or job_run
            )  # a kind's own loop, else the classifier's
            document = loop.run_job(runtime, source, backbone, pretrained, tasks[0], watch=watch)
    if not runtime.chief:
        return None
    found = card_scores.entries(document) if cards else []
    for path in card_scores.add(cards, found) if found else ():
        print(f"model card: {path}")
    if cards and not found:
        print("model card: unchanged (no seed has scores)")
    return document


def glue_run(
    runtime, source, backbone, pretrained: dict, tasks: list[jobs.Job], mnli_start: bool, watch=None
) -> dict:
    """Every GLUE task in turn (MNLI first), then the summary and the GLUE score (the caller
    adds the protocol and writes `{output_dir}/results.json`). With `mnli_start`, RTE, MRPC
    and STS-B start from the backbone of MNLI's best seed at its best epoch."""
    best = {"score": None, "weights": None}

    def keep_best(record, model):
        # run_seed leaves the best epoch's weights in the model.
        if record.get("diverged"):
            return
        score = record["dev"]["accuracy"]
        if best["score"] is None or score > best["score"]:
            best.update(score=score, weights=model.backbone.get_weights())

    documents = {}
    for job in tasks:
        start = backbone
        if mnli_start and job.name in glue.MNLI_STARTED:  # its job says so (`jobs.glue_jobs`)
            if best["weights"] is None:
                raise UserError("--mnli_start: every MNLI seed diverged, none to start from")
            start = backbone.started_from(best["weights"])
        keep = keep_best if mnli_start and job.name == "mnli" else None
        documents[job.name] = job_run.run_job(runtime, source, start, pretrained, job, keep, watch)
        job_run.say(runtime, results.table(documents[job.name]))
    document = glue_summary(documents)
    document["pretraining"] = pretrained
    document["model"] = next(iter(documents.values()))["model"]
    return document


def devices(config: FinetuneFlags, tasks: list[jobs.Job]):
    """The trainer's Runtime for --strategy / --cpu_replicas (`trainer.backends`: JAX
    DataParallel, a TensorFlow strategy); refuses a global batch the replicas cannot share."""
    from trainer import backends
    from trainer.finetuning.classifier import jit_default

    # The step flags at the device rule's defaults: fine-tuning decides XLA itself
    # (`classifier.jit_default`, given whether the devices can run it) and runs one step per call
    # (its epochs are short, and each ends in an evaluation).
    runtime = backends.setup(DeviceRequest.of(config))
    jit_default(config.jit_compile, runtime.device.jit)  # refuses XLA where it fails, now
    for job in tasks:
        batch, replicas = job.recipe.batch_size, runtime.replicas
        if batch % replicas:
            given = (
                f"--batch_size {batch}"
                if config.batch_size
                else (f"{job.name}'s batch of {batch} (pass --batch_size)")
            )
            raise UserError(
                f"{given} is the global batch and does not split over {replicas} "
                f"replicas: give a multiple of {replicas}"
            )
    return runtime


def glue_summary(documents: dict) -> dict:
    """{tasks: {task: {metric: mean over seeds}, seeds, collapsed}, glue: score}."""
    tasks, reported = {}, {}
    for name, document in documents.items():
        scores = document["scores"]
        if "dev" in scores["summary"]:  # else every seed diverged: no score for the task
            reported[name] = glue.reported(glue.TASKS[name], scores["summary"])
        tasks[name] = {
            "reported": reported.get(name),
            "metric": scores["metric"],
            "seeds": [r["seed"] for r in scores["seeds"]],
            "collapsed_seeds": scores["summary"]["collapsed_seeds"],
            "seeds_in_mean": scores["summary"]["seeds_in_mean"],
            "results": fs.join(name, results.RESULTS),
            "dataset": document.get("dataset"),
            "export": (document.get("export") or {}).get("path"),  # its transformers folder
        }
    return {"glue": glue.glue_score(reported), "tasks": tasks}


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    config = flags.parse(parser, FinetuneFlags, argv)

    def body():
        if config.backend is None:  # else the flag chose it
            keras_backend.check()
        from trainer import backends  # imports Keras: after the backend is chosen

        with backends.errors_end_pod_processes():  # a pod's refusal: one line per host
            document = finetune(config)
        if document is None:  # a pod's process other than 0
            return
        if config.task == "glue":
            print(results.glue_table(document))
        else:
            print((runners.of(config.task_type) or results).table(document))
        print(f"results: {fs.join(config.output_dir, results.RESULTS)}")

    return run_cli(body, argv)
