"""Our trainer's side, run in the JAX child: `trainer.pretraining.task.run` on synthetic prepared
shards, examples/s after its first interval (which compiles); and the family's facts, read
from its record here, the one process of the three that imports the trainer."""

from __future__ import annotations

import collections
import json
import os
import shlex
import tempfile

from benchmarks.accel import child, peak, synthetic

# The shape of each configuration that the PyTorch child builds transformers' model with.
SHAPE = ("num_layers", "num_heads", "hidden_dim", "intermediate_dim")


def family_facts(args, accelerator: bool) -> dict:
    """What the parent's table and the PyTorch child, which cannot import the trainer, need
    of the family's record: the vocabulary, the masking rate of its recipe, whether its rows
    hold packed documents, and per configuration ("size/length") the shape and the model
    FLOPs per token (trainer/families/flops.py), the same for both frameworks."""
    from trainer import families
    from trainer.models import model

    record = families.get(args.family)  # a name enters: --family
    rate = record.recipe_value("mlm_probability")
    vocab = args.vocab or record.hub_vocabulary  # None: the family's published checkpoint's
    configs = {}
    for size, length in child.configs(args, accelerator):
        config = model.backbone_config(record, size, vocab, length)
        configs[f"{size}/{length}"] = {
            **{k: config[k] for k in SHAPE},
            "flops_per_token": record.flops_per_token(config, length, rate),
        }
    packed = bool(record.packed_rows_only)  # a backbone that keeps packed documents apart
    return {"vocab": vocab, "mask_rate": rate, "packed": packed, "configs": configs}


def unfused(family: str) -> tuple[str, str]:
    """The trainer flag that turns fused attention off (the retry when a fused kernel fails),
    and the flag's text: a backbone that picks its own kernel takes the record's portable
    attention arguments (ModernBERT: XLA's), the others --fused_attention false."""
    from trainer import families

    portable = families.get(family).portable_attention
    if portable:
        return "--config", f"--config '{json.dumps(portable)}'"
    return "--fused_attention", "--fused_attention false"


def attention_recorder():
    """A Keras callback that keeps, at the end of training, how many layers took each
    attention path (a backbone that picks its own records them: ModernBERT's
    `attention_paths_used`); None where the backbone does not say."""
    import keras

    class Recorder(keras.callbacks.Callback):
        paths = None

        def on_train_end(self, logs=None):
            used = getattr(self.model.masked_lm.backbone, "attention_paths_used", None)
            if used is not None:
                Recorder.paths = dict(collections.Counter(str(p) for p in used))

    return Recorder()


def train_ours(args, size: str, length: int, accelerator: bool) -> dict:
    """examples/s of `trainer.pretraining.task.run` after its first interval (which compiles). The
    family's pretraining recipe applies (ModernBERT: 30 % masking, warmup-stable-decay,
    update clipping); ModernBERT's rows hold packed documents."""
    from trainer import families
    from trainer.pretraining import task
    from trainer.pretraining.config import parse_args

    batch, total = child.batch(args, length), args.interval * args.intervals
    packed = bool(families.get(args.family).packed_rows_only)  # rows as its prepare writes
    with tempfile.TemporaryDirectory() as root:
        data = synthetic.write_prepared(
            root, length, args.vocab, min(batch * total, args.max_rows), batch, packed
        )
        config = parse_args(
            [
                *("--train_data", data["train"], "--eval_data", data["validation"]),
                *("--output_dir", os.path.join(root, "run")),
                *("--family", args.family, "--model", size, "--backend", "jax"),
                *("--strategy", "auto" if accelerator else "cpu"),
                *("--per_replica_batch_size", str(batch), "--train_steps", str(total)),
                *("--eval_every", str(args.interval), "--save_every", str(total)),
                *("--max_eval_batches", "1", "--learning_rate", "1e-4"),
                *("--shuffle_buffer_size", "1024", "--verbose", "0"),
                *shlex.split(args.trainer_args),
            ]
        )
        recorder = attention_recorder()
        metrics = task.run(config, extra_callbacks=[recorder])
        with open(os.path.join(root, "run", "run_config.json")) as f:
            run = json.load(f)
    result = {
        "examples_per_second": metrics["examples_per_second"],
        "batch": batch,
        "precision": run["precision"],
        "fused_attention": run.get("fused_attention"),
        "mask_rate": run["mlm_probability"],
    }
    return {**result, **({"attention_paths": recorder.paths} if recorder.paths else {})}


def jax_child(args) -> None:
    """Prints the device and its peak, then one JSON line per configuration as it ends (a
    parent that stops this process at its time limit keeps the lines printed so far)."""
    import jax

    from benchmarks import accel_paths

    accelerator = jax.default_backend() != "cpu"
    facts = family_facts(args, accelerator)  # first: the parent needs them even if all fail
    args.vocab = facts["vocab"]
    kernel = (
        child.guarded(lambda: {"attention": accel_paths.attention_kernel(family=args.family)})
        if accelerator
        else {"attention": "n/a on a CPU"}
    )
    child.emit(
        {
            "device": jax.devices()[0].device_kind,
            "accelerator": accelerator,
            "peak": peak.jax_peak(accelerator),
            "attention": kernel.get("attention") or kernel["error"],
            "facts": facts,
        }
    )
    note = None  # why fused attention was switched off, once it was
    flag, unfuse = unfused(args.family)
    for size, length in child.configs(args, accelerator):
        result = child.guarded(lambda s=size, n=length: train_ours(args, s, n, accelerator))
        if "error" in result and accelerator and flag not in args.trainer_args:
            # A fused kernel is chosen when the step is traced or compiled: if it fails,
            # measure the rest of the step without it rather than nothing, and say so on
            # every row after.
            args.trainer_args += " " + unfuse
            note = f"without fused attention, which failed ({result['error'][:200]})"
            result = child.guarded(lambda s=size, n=length: train_ours(args, s, n, accelerator))
        child.emit({"run": f"{size}/{length}", **result, **({"note": note} if note else {})})
