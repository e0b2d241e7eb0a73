"""Splits of one prepared output committed by different prepare runs (a rerun cut short
between its manifest writes) are refused in one line, before any file of the
run folder is written; splits of different outputs are the user's choice."""

import json

from tests.trainer.mlm_data import repetitive_sequences, task_args, write_split
from tests.trainer.pretraining.test_preemption import same_on_every_backend
from trainer.pretraining import task

RUN_NEW, RUN_OLD = "r20261126120000aaaaaa", "r20261120120000bbbbbb"


def _prepared(root, info, run_ids: dict):
    """train/ and validation/ of one output folder, their manifests naming `run_ids`."""
    for split, rows, seed in (("train", 256, 0), ("validation", 64, 1)):
        write_split(
            str(root / split), *repetitive_sequences(rows, seed), info, num_shards=1, split=split
        )
        path = root / split / "manifest.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "run_id": run_ids[split]}))


def _args(corpus, data, out):
    args = task_args(corpus, out, "--train_steps", "2", "--eval_every", "2", "--save_every", "2")
    args[args.index("--train_data") + 1] = str(data / "train")
    args[args.index("--eval_data") + 1] = str(data / "validation")
    return args


@same_on_every_backend
def test_train_and_validation_of_different_prepare_runs_are_refused(corpus, tmp_path, capsys):
    data, out = tmp_path / "prepared", tmp_path / "run"
    _prepared(data, corpus["info"], {"train": RUN_NEW, "validation": RUN_OLD})
    assert task.main(_args(corpus, data, out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mixes splits of different prepare runs" in err[0], err
    assert f"train/ from run {RUN_NEW}" in err[0] and f"validation/ from run {RUN_OLD}" in err[0]
    assert not out.exists()


@same_on_every_backend
def test_splits_of_one_prepare_run_pass_the_check(corpus, tmp_path):
    from trainer.data import splits as data_lib

    data = tmp_path / "prepared"
    _prepared(data, corpus["info"], {"train": RUN_NEW, "validation": RUN_NEW})
    sources = [
        data_lib.resolve_split(str(data / s), corpus["info"]) for s in ("train", "validation")
    ]
    data_lib.check_one_prepare_run(*sources)  # one run: nothing to say
    other = tmp_path / "elsewhere"  # another output's split: the user's choice
    _prepared(other, corpus["info"], {"train": RUN_OLD, "validation": RUN_OLD})
    data_lib.check_one_prepare_run(
        sources[0], data_lib.resolve_split(str(other / "validation"), corpus["info"])
    )
