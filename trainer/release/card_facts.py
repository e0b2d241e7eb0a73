"""What a model card says, gathered from the run's own files: nothing is typed in twice.

The facts of one exported model come from its `run_config.json` (architecture, tokenizer ids,
recipe, and the recipe of each attempt that trained the exported weights:
`trainer.run_folder.attempts`), the step of the checkpoint it was exported from, the evaluation at
that step (`metrics.json` when it is the run's last step, else the `history.json` entry of that
step), the unigram baseline (`trainer.baseline`, the same figure `python -m trainer.baseline`
prints) and the prepare manifests of its training and evaluation splits (documents, tokens,
dedup and filter counts). What cannot be read at export time (the data was moved, or the
split changed since training) is None, and the card says so instead of guessing.

Example:
    >>> facts = gather(source, tokenizer, parameters=1_234_567)  # source: where the model is
    >>> facts.step, facts.results["eval_accuracy"]
    (4000, 0.264)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import posixpath

from common import fs, manifest
from common.errors import UserError
from trainer.release import baseline
from trainer.run_folder import attempts, run_dir
from trainer.run_folder.run_dir import RUN_CONFIG, RunDir
from trainer.run_folder.run_record import RunRecord

RESULT_KEYS = ("eval_loss", "eval_accuracy", "eval_perplexity")
_MAX_PRESET_HOPS = 8  # a preset exported from a preset exported from ... a checkpoint


@dataclasses.dataclass(frozen=True)
class CardFacts:
    record: RunRecord  # the exported model's run_config.json
    parameters: int
    tokenizer_kind: dict  # model type, pre-tokenizer
    step: int | None  # optimizer step of the exported weights
    results: dict | None  # RESULT_KEYS at `step`
    baseline: dict | None  # token, share (of the run's evaluation tokens)
    train_data: dict | None  # see `split_summary`
    eval_data: dict | None
    notes: tuple = ()  # why a missing fact is missing
    # trainer.run_folder.attempts.spans: the attempts that trained these weights (Recipes)
    attempts: tuple = ()

    @property
    def baseline_ratio(self) -> float | None:
        if not self.results or not self.baseline or not self.baseline["share"]:
            return None
        return self.results["eval_accuracy"] / self.baseline["share"]


def origin_checkpoint(source) -> str | None:
    """The `ckpt-*.weights.h5` the model's weights come from; a preset is followed back
    through the `exported_from` that `trainer.export` records in its run_config.json."""
    path, record = source.path, source.record
    for _ in range(_MAX_PRESET_HOPS):
        if run_dir.step_of(path) is not None:
            return path if fs.exists(path) else None
        path = record.exported_from
        if not path:
            return None
        if run_dir.step_of(path) is None:  # another preset: read where it came from
            if not fs.exists(fs.join(path, RUN_CONFIG)):
                return None
            record = RunRecord.read(fs.join(path, RUN_CONFIG))
    return None


def results_at(run_root: str, step: int) -> dict | None:
    """The evaluation at `step`: metrics.json if the run ended there, else history.json."""
    run = RunDir(run_root)
    if fs.exists(run.metrics):
        metrics = fs.read_json(run.metrics)
        if metrics.get("steps") == step:
            return {key: metrics[key] for key in RESULT_KEYS}
    history = fs.read_json(run.history) if fs.exists(run.history) else []
    entry = next((e for e in history if e["step"] == step and "eval_loss" in e), None)
    return {key: entry[key] for key in RESULT_KEYS} if entry else None


def split_summary(split_dir: str, expected_digest: str | None) -> tuple[dict | None, str]:
    """(what the split's manifest records, or None; why None). The digest is the one
    `trainer.data.splits` computes, so a split rewritten since training is not described."""
    found = manifest.try_read(split_dir)
    if found is None:
        return None, f"no readable manifest at {fs.basename(split_dir)}/ at export time"
    digest = hashlib.sha256(found.to_json().encode()).hexdigest()
    if expected_digest and digest != expected_digest:
        return None, f"{fs.basename(split_dir)}/ was prepared again after training"
    run = found.accounting.get("run", {})
    own = found.accounting.get("split", {})
    return {
        "split": found.split,
        "sequences": found.num_examples,
        "tokens": found.num_tokens,
        "max_length": found.max_length,
        "shards": len(found.shards),
        "digest": digest,
        "split_documents": own.get("documents_tokenized"),
        "documents_read": run.get("documents_read"),
        "documents_tokenized": run.get("documents_tokenized"),
        "documents_empty": run.get("documents_empty"),
        "documents_rejected": run.get("documents_rejected"),
        "duplicates_by_kind": run.get("duplicates_by_kind"),
        "filtered_by_rule": run.get("filtered_by_rule"),
        "decontamination": found.decontamination,  # {}: not checked (prepare --decontaminate)
        "quality_model": found.quality_model,  # {}: no model scored it (prepare --quality_model)
        "tokens_dropped": own.get("tokens_dropped"),
    }, ""


def tokenizer_kind(tokenizer, special_token_ids: dict) -> dict:
    """The `tokenizers` model type (Unigram, BPE, WordPiece...), pre-tokenizer and the
    special tokens by role."""
    spec = json.loads(tokenizer.to_str())
    pre = spec.get("pre_tokenizer") or {}
    return {
        "model": (spec.get("model") or {}).get("type"),
        "pre_tokenizer": pre.get("type"),
        "special_tokens": {
            role: tokenizer.id_to_token(token_id)
            for role, token_id in sorted(special_token_ids.items())
        },
    }


def _baseline(run_root: str, tokenizer) -> tuple[dict | None, str]:
    try:
        top, share = baseline.unigram_baseline(run_root)
    except (UserError, OSError) as err:  # the data is gone or moved: say so, do not guess
        return None, f"unigram baseline not computed: {str(err).splitlines()[0]}"
    return {"token": tokenizer.id_to_token(top), "share": share}, ""


def _splits(record: RunRecord) -> tuple:
    """(train summary, eval summary, notes) from the splits the run config names."""
    if not record.train_data or not record.eval_data:
        return None, None, ["the run config names no training data"]
    train, why_train = split_summary(record.train_data, record.train_data_digest)
    evaluation, why_eval = split_summary(record.eval_data, None)
    return train, evaluation, [w for w in (why_train, why_eval) if w]


def gather(source, tokenizer, parameters: int) -> CardFacts:
    """Every fact of the card of `source` (the ModelSource export resolved: path, record)."""
    record = source.record
    checkpoint = origin_checkpoint(source)
    step = run_dir.step_of(checkpoint) if checkpoint else None
    train, evaluation, notes = _splits(record)
    results, base = None, None
    if checkpoint is None:
        notes.append("the training run this model came from was not found at export time")
    else:
        root = posixpath.dirname(posixpath.dirname(checkpoint)) or "."
        results = results_at(root, step)
        if results is None:
            notes.append(f"no evaluation was recorded at step {step}")
        if record.train_data and record.eval_data:
            base, why = _baseline(root, tokenizer)
            notes += [why] if why else []
    kind = tokenizer_kind(tokenizer, record.tokenizer["special_token_ids"])
    return CardFacts(
        record,
        parameters,
        kind,
        step,
        results,
        base,
        train,
        evaluation,
        tuple(notes),
        tuple(attempts.spans(list(record.attempts), step)),
    )
