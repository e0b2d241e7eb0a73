"""How well the model being fine-tuned learnt its pretraining task, shown beside its scores.

A model still on the masked-LM plateau (masked accuracy near the unigram baseline, the score
of always answering the most frequent token: `trainer.baseline`) can fine-tune worse than
random weights; seen here on an 18-label task. So results carry the pretraining run's masked
accuracy (its `metrics.json` or `history.json` at the checkpoint's step, as the model card
reads it; for an export whose run is not here, its model card's `model-index`) and a warning
when it is within `PLATEAU_RATIO` of that baseline.

Example:
    >>> facts = pretraining_facts(source)
    >>> facts["masked_accuracy"], facts["unigram_baseline"], facts["warning"]
    (0.062, 0.051, 'masked accuracy 6.2 % is near the unigram baseline 5.1 % ...')
"""

from __future__ import annotations

import posixpath

from common import fs
from common.errors import UserError
from trainer.release import baseline, card_facts, model_card
from trainer.run_folder import run_dir

# Below 3x the baseline a run is taken to be on (or near) the plateau. Measured on the demo's
# corpus (docs/finetuning.md): a tiny model at 2.4x (8.4 % vs 3.4 %) fine-tuned far worse than
# random weights on an 8-label task (macro-F1 0.24 vs 0.73), one at 9.5x better (0.79). The
# edge between the two is a judgement, not a measurement.
PLATEAU_RATIO = 3.0


def plateau_warning(accuracy: float | None, share: float | None) -> str | None:
    if accuracy is None or not share or accuracy >= PLATEAU_RATIO * share:
        return None
    return (
        f"masked accuracy {100 * accuracy:.1f} % is near the unigram baseline "
        f"{100 * share:.1f} % (under {PLATEAU_RATIO:g}x): the model may still be on the "
        "masked-LM plateau, and may fine-tune worse than random weights"
    )


def pretraining_facts(source) -> dict:
    """{masked_accuracy, step, unigram_baseline, warning, notes} of a resolved model source;
    what cannot be found is None with a note saying why."""
    facts = {
        "masked_accuracy": None,
        "step": None,
        "unigram_baseline": None,
        "warning": None,
        "notes": [],
    }
    checkpoint = card_facts.origin_checkpoint(source)
    if checkpoint is None:
        return _from_model_card(source, facts)
    step = run_dir.step_of(checkpoint)
    root = posixpath.dirname(posixpath.dirname(checkpoint)) or "."
    results = card_facts.results_at(root, step)
    facts["step"] = step
    if results is None:
        facts["notes"].append(f"no evaluation was recorded at step {step}")
    else:
        facts["masked_accuracy"] = results["eval_accuracy"]
    try:
        facts["unigram_baseline"] = baseline.unigram_baseline(root)[1]
    except (UserError, OSError) as err:
        facts["notes"].append(f"unigram baseline not computed: {str(err).splitlines()[0]}")
    facts["warning"] = plateau_warning(facts["masked_accuracy"], facts["unigram_baseline"])
    return facts


def _from_model_card(source, facts: dict) -> dict:
    """An export whose run is not here (moved, downloaded): its model card's `model-index`
    (`trainer.release.model_card`) still holds the masked accuracy and the ratio to the baseline."""
    card_path = fs.join(source.path, model_card.README)
    results = _card_results(card_path) if source.kind == "preset" else {}
    if "accuracy" not in results:
        facts["notes"].append(
            "the pretraining run of this model was not found and its model "
            "card gives no masked accuracy: it is unknown"
        )
        return facts
    facts["masked_accuracy"] = results["accuracy"]
    ratio = results.get("unigram_baseline_ratio")
    facts["unigram_baseline"] = results["accuracy"] / ratio if ratio else None
    facts["notes"].append(f"masked accuracy read from {card_path}")
    facts["warning"] = plateau_warning(facts["masked_accuracy"], facts["unigram_baseline"])
    return facts


def _card_results(card_path: str) -> dict:
    """{metric type: value} of the fill-mask results in a model card; {} if none."""
    if not fs.exists(card_path):
        return {}
    from huggingface_hub import ModelCard

    try:
        card = ModelCard(fs.read_bytes(card_path).decode("utf-8"))
    except ValueError:  # no YAML metadata block, or a malformed one
        return {}
    return {
        r.metric_type: float(r.metric_value)
        for r in card.data.eval_results or ()
        if r.task_type == "fill-mask"
    }
