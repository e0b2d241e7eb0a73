"""benchmarks/masking_study.py: the variants it accepts, the table it prints
and that it reuses finished runs. No training here: the runs are written as files in the shape
trainer.task and trainer.finetune write them."""

import json

import pytest

from benchmarks import masking_study
from common.errors import UserError


def test_variant_modes_are_the_trainers_masking_modes():
    from trainer.data import masking

    assert masking_study.MODES == masking.MODES


def test_variants_parse_to_named_mode_and_rate():
    variants = masking_study.parse_variants("token:0.15, token:0.3,whole_word:0.15")
    assert [(v.mode, v.rate, v.name) for v in variants] == [
        ("token", 0.15, "token-15"),
        ("token", 0.3, "token-30"),
        ("whole_word", 0.15, "whole_word-15"),
    ]


@pytest.mark.parametrize(
    "text, words",
    [
        ("tokens:0.15", "the mode must be one of"),
        ("token:x", "must be a number"),
        ("token:1.5", "above 0 and below 1"),
        ("token:0.15,token:0.150", "named twice"),
    ],
)
def test_bad_variants_are_one_user_error(text, words):
    with pytest.raises(UserError, match=words):
        masking_study.parse_variants(text)


def _finished_variant(folder, steps, loss, accuracy, scores):
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "metrics.json").write_text(
        json.dumps({"steps": steps, "eval_loss": loss, "eval_accuracy": accuracy})
    )
    (folder / "finetune").mkdir()
    (folder / "finetune" / "results.json").write_text(
        json.dumps(
            {
                "scores": {
                    "metric": "macro_f1",
                    "summary": {"collapsed_seeds": []},
                    "seeds": [{"dev": {"macro_f1": s}} for s in scores],
                }
            }
        )
    )


def _task_files(tmp_path):
    (tmp_path / "data" / "train").mkdir(parents=True)
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{}")
    (tmp_path / "task").mkdir()
    for name in ("train.jsonl", "dev.jsonl"):
        (tmp_path / "task" / name).write_text("")
    return [
        "--data",
        str(tmp_path / "data"),
        "--tokenizer",
        str(tmp_path / "tok"),
        "--task",
        str(tmp_path / "task"),
        "--output_dir",
        str(tmp_path / "out"),
    ]


def test_finished_runs_are_reused_and_tabled_with_the_distance_in_seed_spreads(tmp_path, capsys):
    _finished_variant(tmp_path / "out" / "token-15", 2000, 4.2, 0.25, [0.70, 0.72])
    _finished_variant(tmp_path / "out" / "token-30", 2000, 4.9, 0.18, [0.76, 0.80])
    args = _task_files(tmp_path) + ["--variants", "token:0.15,token:0.3", "--steps", "2000"]
    assert masking_study.main(args) == 0
    printed = capsys.readouterr().out
    assert (tmp_path / "out" / "table.md").read_text().strip() in printed
    rows = [line for line in printed.splitlines() if line.startswith("| token")]
    assert rows[0].startswith("| token 15 % | 2000 | 4.200 | 25.0 % | 0.710 ± 0.014 |")
    # mean 0.78 vs 0.71: +0.070, the larger std is 0.0283 (0.76, 0.80): 2.5 spreads
    assert "| 0.780 ± 0.028 | 0.760, 0.800 | +0.070 | +2.5 |" in rows[1]
    assert "not comparable across rates" in printed


def test_a_finished_run_of_other_length_is_refused_not_resumed(tmp_path, capsys, monkeypatch):
    _finished_variant(tmp_path / "out" / "token-15", 1000, 4.2, 0.25, [0.70, 0.72])
    monkeypatch.setattr(masking_study, "_run", lambda argv, log: pytest.fail("trained"))
    args = _task_files(tmp_path) + ["--variants", "token:0.15", "--steps", "2000"]
    assert masking_study.main(args) == 2
    assert "holds a 1000-step run, not --steps 2000" in capsys.readouterr().err


def test_a_failed_run_is_one_line(tmp_path, capsys, monkeypatch):
    calls = []

    def fail(argv, log):
        calls.append(argv)
        raise UserError(f"{argv[0]} failed (exit 1); see {log}")

    monkeypatch.setattr(masking_study, "_run", fail)
    args = _task_files(tmp_path) + ["--variants", "whole_word:0.3", "--steps", "7"]
    assert masking_study.main(args) == 2
    assert calls[0][0] == "trainer.task"
    assert calls[0][calls[0].index("--train_steps") + 1] == "7"
    assert calls[0][calls[0].index("--masking") + 1] == "whole_word"
    assert calls[0][calls[0].index("--mlm_probability") + 1] == "0.3"
    assert capsys.readouterr().err.strip().startswith("error: trainer.task failed (exit 1)")


def test_missing_task_is_one_line(tmp_path, capsys):
    args = _task_files(tmp_path)
    (tmp_path / "task" / "dev.jsonl").unlink()
    assert masking_study.main(args) == 2
    assert "dev.jsonl does not exist" in capsys.readouterr().err
