"""The unigram-frequency baseline the demo prints beside the model's accuracy."""

import numpy as np

from tests.trainer.mlm_data import repetitive_sequences
from trainer import baseline


def _content_counts(ids, mask):
    return np.bincount(ids[(mask > 0) & (ids >= 5)], minlength=100)  # ids < 5: specials


def test_baseline_is_the_top_training_token_share_of_the_eval_tokens(full_run, capsys):
    train_counts = _content_counts(*repetitive_sequences(2048, seed=0))
    eval_counts = _content_counts(*repetitive_sequences(256, seed=1))
    top, share = baseline.unigram_baseline(str(full_run))
    assert top == int(np.argmax(train_counts))
    assert share == eval_counts[top] / eval_counts.sum()
    assert baseline.main(["--run_dir", str(full_run)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("eval masked accuracy ") and f"{100 * share:.1f} %" in line
    assert f"always answering 'w{top - 5}'" in line


def test_a_folder_without_a_run_is_one_line(tmp_path, capsys):
    assert baseline.main(["--run_dir", str(tmp_path)]) == 2
    assert "holds no run_config.json" in capsys.readouterr().err
