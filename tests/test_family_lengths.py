"""benchmarks/family_lengths.py: the step-time-by-length table of RoBERTa and ModernBERT."""

import os

import pytest

from benchmarks import family_lengths


def test_the_table_gives_each_familys_growth_beside_its_counted_flops():
    args = family_lengths.parse(["--lengths", "128,2048", "--batch_tokens", "8192"])
    medians = {
        ("roberta", 128): 0.100,
        ("roberta", 2048): 0.300,
        ("modernbert", 128): 0.120,
        ("modernbert", 2048): 0.180,
    }
    lines = family_lengths.table(args, medians)
    row = lines[-1].split("|")
    assert row[0].split() == ["2048", "4"]
    ms, grown, counted = row[1].replace("(", " ").replace(")", " ").split()
    assert (float(ms), float(grown)) == (300.0, 3.0)
    # RoBERTa's attention grows with the length; ModernBERT's local layers do not
    roberta = family_lengths.step_flops(args, "roberta", 2048)
    assert float(counted) == pytest.approx(
        roberta / family_lengths.step_flops(args, "roberta", 128), abs=0.005
    )
    modernbert_counted = float(row[2].replace("(", " ").replace(")", " ").split()[2])
    assert 1 < modernbert_counted < float(counted)
    assert row[3].strip() == "0.60"


def test_bad_lengths_are_refused_in_one_line(capsys):
    with pytest.raises(SystemExit):
        family_lengths.parse(["--lengths", "128,x"])
    assert "want lengths such as 128,512,2048, not '128,x'" in capsys.readouterr().err


@pytest.mark.skipif(os.environ.get("KERAS_BACKEND") != "jax", reason="times JAX's step")
@pytest.mark.slow
def test_both_families_train_at_each_length_on_packed_documents():
    # one length: each compile costs seconds here (the table's ratios are tested above)
    args = family_lengths.parse(
        ["--lengths", "32", "--batch_tokens", "64", "--vocab", "100", "--rounds", "1"]
    )
    medians = family_lengths.measure(args)
    assert set(medians) == {("roberta", 32), ("modernbert", 32)}
    assert all(seconds > 0 for seconds in medians.values())
