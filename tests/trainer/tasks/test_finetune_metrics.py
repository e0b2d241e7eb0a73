"""The fine-tuning scores against values worked out by hand on tiny arrays, and the
protocol's summary (spread over seeds, collapsed seeds)."""

import math

import numpy as np
import pytest

from trainer.finetuning import protocol
from trainer.tasks import metrics


def test_accuracy_is_the_share_of_exact_matches():
    assert metrics.accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5


def test_binary_f1_counts_the_positive_class_only():
    # TP = 2 (rows 0, 4), FP = 1 (row 3), FN = 1 (row 1): F1 = 2*2 / (2*2 + 1 + 1) = 2/3.
    assert metrics.f1([1, 1, 0, 0, 1], [1, 0, 0, 1, 1]) == pytest.approx(2 / 3)


def test_macro_f1_averages_every_class_including_one_never_predicted():
    # class 0: TP 1, FP 2, FN 0 -> 2/4; class 1: TP 1, FP 0, FN 1 -> 2/3; class 2: TP 0,
    # FP 0, FN 1 -> 0.  Mean = (1/2 + 2/3 + 0) / 3 = 7/18.
    labels, predictions = [0, 1, 1, 2], [0, 1, 0, 0]
    assert metrics.macro_f1(labels, predictions, 3) == pytest.approx(7 / 18)


def test_binary_mcc_matches_the_textbook_formula():
    # TP 2, TN 1, FP 1, FN 1: (2*1 - 1*1) / sqrt(3 * 3 * 2 * 2) = 1/6.
    assert metrics.mcc([1, 1, 0, 0, 1], [1, 0, 0, 1, 1], 2) == pytest.approx(1 / 6)


def test_multiclass_mcc_is_gorodkins():
    # labels [0,0,1,2], predictions [0,1,1,2]: c = 3, s = 4, t = (2,1,1), p = (1,2,1):
    # (3*4 - t.p) / sqrt((16 - p.p)(16 - t.t)) = (12 - 5) / sqrt(10 * 10) = 0.7.
    assert metrics.mcc([0, 0, 1, 2], [0, 1, 1, 2], 3) == pytest.approx(0.7)


def test_constant_predictions_score_zero_correlation_not_nan():
    assert metrics.mcc([0, 1, 0, 1], [1, 1, 1, 1], 2) == 0.0
    assert metrics.pearson([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]) == 0.0
    assert metrics.spearman([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]) == 0.0


def test_pearson_by_hand():
    # x - mean = (-1, 0, 1); y = (1, 2, 4) - 7/3 = (-4/3, -1/3, 5/3):
    # sum xy = 3, sum xx = 2, sum yy = 42/9 -> 3 / sqrt(2 * 42 / 9).
    assert metrics.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(84 / 9))


def test_spearman_gives_ties_their_average_rank():
    # ranks (1, 2.5, 2.5, 4) vs (1, 2, 3, 4): centred (-1.5, 0, 0, 1.5), (-1.5, -.5, .5, 1.5)
    # -> 4.5 / sqrt(4.5 * 5).
    assert list(metrics.ranks([1, 2, 2, 3])) == [1.0, 2.5, 2.5, 4.0]
    assert metrics.spearman([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(4.5 / math.sqrt(22.5))


def test_mse_by_hand():
    assert metrics.mse([1.0, 2.0], [2.0, 4.0]) == pytest.approx(2.5)


def test_f1_is_reported_for_two_classes_only():
    assert set(metrics.classification_scores([0, 1], [0, 1], 2)) == {
        "accuracy",
        "f1",
        "macro_f1",
        "mcc",
    }
    assert "f1" not in metrics.classification_scores([0, 1, 2], [0, 1, 2], 3)


def test_spread_is_mean_sample_std_and_median():
    found = protocol.spread([0.5, 0.7, 0.9])
    assert found["mean"] == pytest.approx(0.7)
    assert found["std"] == pytest.approx(0.2)  # sqrt((0.04 + 0 + 0.04) / 2)
    assert found["median"] == pytest.approx(0.7) and found["n"] == 3
    assert protocol.spread([0.4])["std"] == 0.0


def _record(seed, accuracy):
    return {"seed": seed, "dev": {"accuracy": accuracy, "mcc": 0.0}}


def test_a_seed_at_the_majority_class_level_is_flagged_and_kept_out_of_the_second_mean():
    # Train's majority is class 1, dev's class 0: the level is the best constant on dev.
    data = protocol.TaskData(
        "classification", 2, (None, np.array([1, 1, 1, 0])), (None, np.array([0, 0, 1, 1, 0]))
    )
    constant = protocol.constant_scores(data)  # always class 0: 3/5 of dev
    assert constant["accuracy"] == pytest.approx(0.6) and constant["mcc"] == 0.0
    records = [_record(1, 0.8), _record(2, 0.6), _record(3, 1.0)]
    summary = protocol.summarise(records, "accuracy", constant)
    assert [r["collapsed"] for r in records] == [False, True, False]
    assert summary["collapsed_seeds"] == [2]
    assert summary["dev"]["accuracy"]["mean"] == pytest.approx(0.8)  # all seeds, as peers
    assert summary["dev_excluding_collapsed"]["accuracy"]["mean"] == pytest.approx(0.9)


def test_a_seed_that_gives_one_answer_to_every_dev_example_is_flagged():
    one_answer = {
        "seed": 1,
        "best_epoch": 1,
        "dev": {"accuracy": 0.7},
        "epochs": [{"epoch": 1, "distinct_predictions": 1}],
    }
    varied = {
        "seed": 2,
        "best_epoch": 2,
        "dev": {"accuracy": 0.7},
        "epochs": [
            {"epoch": 1, "distinct_predictions": 1},
            {"epoch": 2, "distinct_predictions": 3},
        ],
    }
    summary = protocol.summarise([one_answer, varied], "accuracy", {"accuracy": 0.5})
    assert summary["collapsed_seeds"] == [1]


def test_regression_collapse_is_judged_against_the_training_mean():
    data = protocol.TaskData(
        "regression", 1, (None, np.array([1.0, 3.0])), (None, np.array([0.0, 4.0]))
    )
    constant = protocol.constant_scores(data)
    assert constant["pearson"] == 0.0 and constant["mse"] == pytest.approx(4.0)
    assert protocol.is_collapsed(0.0, constant["spearman"], "spearman")
    assert not protocol.is_collapsed(0.3, constant["spearman"], "spearman")
    assert protocol.is_collapsed(4.5, constant["mse"], "mse")  # lower is better


def test_the_best_epoch_keeps_the_earlier_one_on_a_tie():
    assert protocol.better(0.5, None, "accuracy")
    assert not protocol.better(0.5, 0.5, "accuracy")
    assert protocol.better(1.0, 2.0, "mse")
