"""The Makefile hands every value a user gives to the commands intact, as text:
a space, a quote, `;`, `$(...)`, backticks or make's own `$(shell ...)` in a value never
runs anything. Each target runs for real with a stand-in Python that records its arguments."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVIL = (
    "a b'\"; touch PWNED1; $(touch PWNED2) `touch PWNED3` $(shell touch PWNED4) "
    "$$HOME ${HOME} \\ #x"
)

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


@pytest.fixture
def make(tmp_path):
    """Runs a target of a copy of the Makefile in `tmp_path`; returns (exit code, the
    stand-in Python's argument lists, stderr)."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    log, fake = tmp_path / "argv.jsonl", tmp_path / "fakepy"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    fake.chmod(0o755)

    def run(target, **values):
        env = {k: v for k, v in os.environ.items() if k not in values}
        done = subprocess.run(
            [
                "make",
                "-s",
                "-C",
                str(tmp_path),
                target,
                f"PY={fake}",
                "STAMP=",
                f"TRAIN_PY={fake}",
                "TRAIN_STAMP=",
                *(f"{k}={v}" for k, v in values.items()),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        log.unlink(missing_ok=True)
        assert not [p for p in tmp_path.rglob("PWNED*")], "a value ran as a command"
        return done.returncode, calls, done.stderr

    return run


def _after(argv, flag):
    return argv[argv.index(flag) + 1]


def test_the_fast_lane_leaves_out_the_slow_tests_and_knows_the_marker(make):
    code, calls, err = make("test-fast", TEST_WORKERS="1")
    assert code == 0, err
    lint = [argv for argv in calls if argv[:2] == ["-m", "ruff"]]
    assert [argv[2] for argv in lint] == ["check", "format"]  # lint first, as `make test`
    calls = [argv for argv in calls if argv not in lint]
    assert calls
    for argv in calls:  # every pass: `-m 'not slow'`, and a misspelt marker is an error
        assert "not slow" in argv and argv[argv.index("not slow") - 1] == "-m", argv
        assert "--strict-markers" in argv, argv
    registered = subprocess.run(
        [sys.executable, "-m", "pytest", "--markers"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "@pytest.mark.slow:" in registered


def test_prepare_gets_every_value_intact(make):
    code, calls, err = make(
        "prepare",
        PROJECT=EVIL,
        BUCKET=EVIL,
        INPUT=EVIL + "/*.jsonl",
        TOKENIZER=EVIL,
        DATA=EVIL,
        REGION=EVIL,
        ARGS="--dedup 'near'",
    )
    assert code == 0, err
    (argv,) = calls
    assert _after(argv, "--project") == EVIL and _after(argv, "--region") == EVIL
    assert _after(argv, "--input") == EVIL + "/*.jsonl"
    assert _after(argv, "--tokenizer") == EVIL and _after(argv, "--output_dir") == EVIL
    assert _after(argv, "--temp_location") == f"gs://{EVIL}/dataflow/tmp"
    assert argv[-2:] == ["--dedup", "'near'"]  # ARGS: words split at spaces, nothing else


def test_train_gets_every_value_intact(make):
    code, calls, err = make(
        "train", BACKEND="tensorflow", DATA=EVIL, OUTPUT=EVIL, TPU=EVIL, TOKENIZER=EVIL, MODEL=EVIL
    )
    assert code == 0, err
    (argv,) = calls
    assert _after(argv, "--train_data") == EVIL + "/train"
    assert _after(argv, "--tpu") == EVIL and _after(argv, "--tokenizer") == EVIL
    assert _after(argv, "--output_dir") == EVIL and _after(argv, "--model") == EVIL
    code, calls, err = make("train", BACKEND=EVIL, DATA="d", OUTPUT="o")
    assert code != 0 and not calls


def test_demo_gets_its_folder_intact(make, tmp_path):
    code, calls, err = make("demo", DEMO=EVIL, DEMO_STEPS="7", PUSH_TO=EVIL)
    assert code == 0, err
    assert _after(calls[4], "--push_to") == EVIL
    assert _after(calls[0], "--output") == EVIL + "/corpus.jsonl"
    assert _after(calls[1], "--output_dir") == EVIL + "/tokenizer-3000"
    assert _after(calls[3], "--train_steps") == "7"
    assert (tmp_path / EVIL).is_dir()


def test_demo_ends_with_the_downstream_task_in_its_folder(make):
    code, calls, err = make(
        "demo", DEMO=EVIL, DEMO_FT_SEEDS="4,5", DEMO_FT_EPOCHS="2", DEMO_FT_BUDGET="7"
    )
    assert code == 0, err
    modules = [argv[1] for argv in calls]
    start = modules.index("benchmarks.demo_task")
    assert modules[start:] == [
        "benchmarks.demo_task",
        *["trainer.finetune"] * 4,
        "benchmarks.demo_task",
        "benchmarks.retrieval_task",
        *["trainer.finetune"] * 2,
        "benchmarks.demo_retrieval",
    ]
    build, *finetunes, report = calls[start : start + 6]
    assert build[2] == "build" and _after(build, "--output_dir") == EVIL + "/task"
    assert _after(build, "--budget") == "7"
    sides = [("pretrained", "few"), ("scratch", "few"), ("pretrained", "all"), ("scratch", "all")]
    for argv, (side, budget) in zip(finetunes, sides):
        assert _after(argv, "--model") == EVIL + "/train"
        train = EVIL + ("/task/train-7.jsonl" if budget == "few" else "/task/train.jsonl")
        assert _after(argv, "--train") == train and _after(argv, "--seeds") == "4,5"
        # A few labels: the size's default recipe; all of them: fewer epochs, to fit the demo.
        if budget == "all":
            assert _after(argv, "--epochs") == "2"
        else:
            assert "--epochs" not in argv
        assert "--learning_rate" not in argv
        assert _after(argv, "--output_dir") == f"{EVIL}/finetune/{side}-{budget}"
        assert ("--from_scratch" in argv) == (side == "scratch")
    assert report[2] == "report" and _after(report, "--finetune_dir") == EVIL + "/finetune"
    assert _after(report, "--budgets") == "few,all"


def test_demo_ends_with_the_retrieval_line_in_its_folder(make):
    code, calls, err = make("demo", DEMO=EVIL, DEMO_EMB_EPOCHS="3")
    assert code == 0, err
    start = [argv[1] for argv in calls].index("benchmarks.retrieval_task")
    build, *finetunes, report = calls[start:]
    assert build[2] == "docstrings" and _after(build, "--output_dir") == EVIL + "/retrieval"
    assert _after(build, "--corpus") == EVIL + "/corpus.jsonl"
    for argv, side in zip(finetunes, ("pretrained", "scratch")):
        assert _after(argv, "--task_type") == "embedding"
        assert _after(argv, "--train") == EVIL + "/retrieval/train.jsonl"
        assert _after(argv, "--dev") == _after(argv, "--test") == EVIL + "/retrieval/beir"
        assert _after(argv, "--epochs") == "3"
        assert _after(argv, "--output_dir") == f"{EVIL}/embed/{side}"
        assert ("--from_scratch" in argv) == (side == "scratch")
    assert _after(report, "--embed_dir") == EVIL + "/embed"


def test_bench_masking_studies_the_demos_folder_with_the_values_given(make):
    code, calls, err = make("bench-masking", DEMO=EVIL, MASKING_STEPS="9", MASKING_VARIANTS=EVIL)
    assert code == 0, err
    (argv,) = calls
    assert argv[:2] == ["-m", "benchmarks.masking_study"]
    assert _after(argv, "--data") == EVIL + "/prepared"
    assert _after(argv, "--tokenizer") == EVIL + "/tokenizer-3000"
    assert _after(argv, "--task") == EVIL + "/task"
    assert _after(argv, "--output_dir") == EVIL + "/masking"
    assert _after(argv, "--steps") == "9" and _after(argv, "--variants") == EVIL


def test_bench_accel_gets_the_arguments_given(make):
    code, calls, err = make("bench-accel", ARGS="--quick --configs base/128")
    assert code == 0, err
    assert calls == [["-m", "benchmarks.bench_accel", "--quick", "--configs", "base/128"]]
