"""The unigram-frequency baseline the demo prints beside the model's accuracy."""

import numpy as np
import pytest

from tests.trainer.mlm_data import repetitive_sequences
from trainer.release import baseline


def _content_counts(ids, mask):
    return np.bincount(ids[(mask > 0) & (ids >= 5)], minlength=100)  # ids < 5: specials


@pytest.mark.slow
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


def _run_without_training(corpus, run_dir, **config):
    """A run folder holding what the baseline reads (run_config.json, tokenizer/)."""
    from common import fs, tokenizer_files
    from tests.trainer.mlm_data import SEQ_LEN
    from trainer.run_folder.run_dir import RunDir

    run = RunDir(str(run_dir))
    tokenizer_files.copy(corpus["tokenizer"], run.tokenizer_dir)
    fs.write_json(
        run.run_config,
        {
            "family": "roberta",
            "backbone_config": {},
            "train_data": corpus["train"],
            "eval_data": corpus["eval"],
            "max_length": SEQ_LEN,
            **config,
        },
    )
    return str(run_dir)


@pytest.mark.parametrize(
    "config, rows_scored",
    [
        # 16 x 1 replica x 32 micro-batches = 512 > the 256 evaluation rows: evaluation ran
        # on 16 batches of 16, the baseline said "fewer than one evaluation batch".
        (
            dict(
                per_replica_batch_size=16,
                replicas=1,
                grad_accum_steps=32,
                global_batch_size=512,
                max_eval_batches=None,
            ),
            256,
        ),
        # 2 evaluation batches of 16 = 32 rows scored, not 2 global batches of 64 = 128.
        (
            dict(
                per_replica_batch_size=16,
                replicas=1,
                grad_accum_steps=4,
                global_batch_size=64,
                max_eval_batches=2,
            ),
            32,
        ),
        # 2 input pipelines (hosts) of 2 replicas: each scores its share of the records.
        (
            dict(
                per_replica_batch_size=8,
                replicas=4,
                input_pipelines=2,
                grad_accum_steps=1,
                global_batch_size=32,
                max_eval_batches=3,
            ),
            96,
        ),
    ],
)
def test_baseline_scores_the_rows_the_run_evaluated_not_the_accumulated_batch(
    corpus, tmp_path, config, rows_scored
):
    run_dir = _run_without_training(corpus, tmp_path / "run", **config)
    top, share = baseline.unigram_baseline(run_dir)
    # What trainer.task evaluates (its TensorFlow runtime: a batch per local replica).
    from trainer.data import splits as data

    source = data.resolve_split(corpus["eval"], corpus["info"])
    pipelines = config.get("input_pipelines", 1)
    evaluated = [
        b
        for p in range(pipelines)
        for b in data.eval_dataset_fn(
            source, config["per_replica_batch_size"], config["max_eval_batches"]
        )(data.PipelineShare(p, pipelines, config["replicas"] // pipelines))
    ]
    assert sum(len(b["input_ids"]) for b in evaluated) == rows_scored
    counts = baseline.token_counts(evaluated, 100, corpus["info"].all_special_ids)
    assert share == counts[top] / counts.sum()
