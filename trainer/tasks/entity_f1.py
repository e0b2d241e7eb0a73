"""Entity-level precision, recall and F1 of tagged words, micro-averaged and per entity type,
by seqeval (the library Hugging Face's token-classification examples score with).

An entity counts as found only when its type and its exact span of words both match. How
tags make entities follows the scheme (`tagging.SCHEMES`):

- IOB1, IOB2: seqeval's default mode, compatible with CoNLL's conlleval script: an I- tag
  after O or after another type starts an entity (IOB1's way, and a lenient reading of a
  model's IOB2 output), so both schemes are scored the same way, as CoNLL-2003 is.
- BIOES: seqeval's strict mode with its IOBES scheme: an entity is B- I-* E- or S- of one
  type; a broken sequence (B- with no E-) is no entity.

A type with no prediction has precision 0 (conlleval's convention; no warning). Predictions
are per word: the first piece's prediction (`word_alignment.word_predictions`).

Example:
    >>> gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    >>> predicted = [["B-PER", "I-PER", "O", "O"]]
    >>> scores = entity_scores(gold, predicted, "IOB2")
    >>> scores.precision, scores.recall, round(scores.f1, 4)      # 1 of 1 found, 1 of 2 gold
    (1.0, 0.5, 0.6667)
    >>> scores.per_type["LOC"]["support"]
    1
"""

from __future__ import annotations

import dataclasses
import warnings

from trainer.tasks.tagging import SCHEMES

STRICT = "BIOES"  # the scheme scored in seqeval's strict mode
_AVERAGES = ("micro avg", "macro avg", "weighted avg")


@dataclasses.dataclass(frozen=True)
class EntityScores:
    precision: float  # micro: entities found right / entities predicted
    recall: float  # micro: entities found right / gold entities
    f1: float
    support: int  # gold entities
    per_type: dict  # type -> {"precision", "recall", "f1", "support"}
    scheme: str
    mode: str  # "conlleval" (seqeval's default) or "strict"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def seqeval_arguments(scheme: str) -> dict:
    """The `mode` and `scheme` seqeval's functions take for one of `tagging.SCHEMES`."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme {scheme!r} is not one of {SCHEMES}")
    if scheme != STRICT:
        return {}
    from seqeval.scheme import IOBES

    return {"mode": "strict", "scheme": IOBES}


def _row(values: dict) -> dict:
    return {
        "precision": float(values["precision"]),
        "recall": float(values["recall"]),
        "f1": float(values["f1-score"]),
        "support": int(values["support"]),
    }


def entity_scores(gold: list, predicted: list, scheme: str) -> EntityScores:
    """Scores of `predicted` tags against `gold` ones: lists of sentences of word tags, one
    predicted tag per gold one."""
    from seqeval.metrics import classification_report

    gold = [list(tags) for tags in gold]
    predicted = [list(tags) for tags in predicted]
    if [len(t) for t in gold] != [len(t) for t in predicted]:
        raise ValueError("gold and predicted tags differ in sentences or words")
    arguments = seqeval_arguments(scheme)
    with warnings.catch_warnings():
        # No entity on either side leaves the macro average a mean of nothing; not read here.
        warnings.simplefilter("ignore", RuntimeWarning)
        report = classification_report(
            gold, predicted, output_dict=True, zero_division=0, **arguments
        )
    micro = _row(report["micro avg"])
    per_type = {name: _row(values) for name, values in report.items() if name not in _AVERAGES}
    return EntityScores(
        precision=micro["precision"],
        recall=micro["recall"],
        f1=micro["f1"],
        support=micro["support"],
        per_type=per_type,
        scheme=scheme,
        mode=arguments.get("mode", "conlleval"),
    )
