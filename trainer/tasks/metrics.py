"""Downstream scores as GLUE reports them, in numpy (no scikit-learn or scipy needed).

- accuracy: share of exact matches;
- f1: binary F1 of the positive class (class id 1: the second label name in sorted order,
  "1" for GLUE's 0/1 labels), as MRPC and QQP report it;
- macro_f1: the unweighted mean of every class's F1 (a class never predicted nor present
  scores 0, as scikit-learn's `zero_division=0`);
- mcc: Matthews correlation, the multi-class form (Gorodkin 2004, what scikit-learn and
  CoLA use); 0 when predictions or labels are constant;
- pearson, spearman: correlation of predictions and targets (Spearman: Pearson of the ranks,
  ties given their average rank); 0 when either side is constant.

Predictions that are not all finite (a diverged model's NaN or infinity) score None on every
metric: NaN would otherwise be ranked (Spearman 1.0 on a dev set sorted by target) or be
averaged into a NaN, and neither is a number to report.

Example:
    >>> accuracy(np.array([1, 0, 1]), np.array([1, 1, 1]))
    0.6666666666666666
    >>> classification_scores(labels, predictions, num_classes=2)
    {'accuracy': ..., 'f1': ..., 'macro_f1': ..., 'mcc': ...}
"""

from __future__ import annotations

import numpy as np

CLASSIFICATION = ("accuracy", "f1", "macro_f1", "mcc")
REGRESSION = ("pearson", "spearman", "mse")
HIGHER_IS_BETTER = {
    "accuracy": True,
    "f1": True,
    "macro_f1": True,
    "mcc": True,
    "pearson": True,
    "spearman": True,
    "mse": False,
    # retrieval (trainer/tasks/retrieval/metrics.py) and tagging (trainer/tasks/entity_f1.py)
    "ndcg@10": True,
    "mrr@10": True,
    "recall@100": True,
    "entity_f1": True,
    "entity_precision": True,
    "entity_recall": True,
    "token_accuracy": True,
}


def accuracy(labels, predictions) -> float:
    return float(np.mean(np.asarray(labels) == np.asarray(predictions)))


def confusion(labels, predictions, num_classes: int) -> np.ndarray:
    """counts[true class, predicted class]."""
    counts = np.zeros((num_classes, num_classes), np.int64)
    np.add.at(counts, (np.asarray(labels), np.asarray(predictions)), 1)
    return counts


def _f1_per_class(counts: np.ndarray) -> np.ndarray:
    true_positive = np.diag(counts).astype(np.float64)
    predicted, actual = counts.sum(0), counts.sum(1)
    denominator = predicted + actual  # 2TP + FP + FN
    return np.divide(
        2 * true_positive, denominator, out=np.zeros_like(true_positive), where=denominator > 0
    )


def f1(labels, predictions, positive: int = 1) -> float:
    """Binary F1 of class `positive`."""
    counts = confusion(labels, predictions, max(2, positive + 1))
    return float(_f1_per_class(counts)[positive])


def macro_f1(labels, predictions, num_classes: int) -> float:
    return float(np.mean(_f1_per_class(confusion(labels, predictions, num_classes))))


def mcc(labels, predictions, num_classes: int) -> float:
    """Matthews correlation: (c*s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)), with c correct,
    s samples, t and p the true and predicted counts per class."""
    counts = confusion(labels, predictions, num_classes).astype(np.float64)
    true, predicted = counts.sum(1), counts.sum(0)
    correct, samples = np.trace(counts), counts.sum()
    denominator = np.sqrt((samples**2 - predicted @ predicted) * (samples**2 - true @ true))
    return float((correct * samples - true @ predicted) / denominator) if denominator else 0.0


def pearson(targets, predictions) -> float:
    x = np.asarray(targets, np.float64) - np.mean(targets)
    y = np.asarray(predictions, np.float64) - np.mean(predictions)
    denominator = np.sqrt((x @ x) * (y @ y))
    return float(x @ y / denominator) if denominator > 0 else 0.0


def ranks(values) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="stable")
    result = np.empty(len(values), np.float64)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        result[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return result


def spearman(targets, predictions) -> float:
    return pearson(ranks(targets), ranks(predictions))


def mse(targets, predictions) -> float:
    difference = np.asarray(targets, np.float64) - np.asarray(predictions, np.float64)
    return float(np.mean(difference**2))


def finite(predictions) -> bool:
    return bool(np.all(np.isfinite(np.asarray(predictions, np.float64))))


def classification_scores(labels, predictions, num_classes: int) -> dict:
    if not finite(predictions):
        return dict.fromkeys(m for m in CLASSIFICATION if m != "f1" or num_classes == 2)
    scores = {"accuracy": accuracy(labels, predictions)}
    if num_classes == 2:
        scores["f1"] = f1(labels, predictions)
    scores["macro_f1"] = macro_f1(labels, predictions, num_classes)
    scores["mcc"] = mcc(labels, predictions, num_classes)
    return scores


def regression_scores(targets, predictions) -> dict:
    if not finite(predictions):
        return dict.fromkeys(REGRESSION)
    return {
        "pearson": pearson(targets, predictions),
        "spearman": spearman(targets, predictions),
        "mse": mse(targets, predictions),
    }
