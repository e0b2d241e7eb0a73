"""ModernBERT's phases on one run: held at its peak (`--decay_ratio 0`), extended with
`--extend_context` to a longer --max_length with a new global rotary theta, then decayed from a
stable checkpoint (`--decay_from_step`). Anything else an extension would change stays
refused, and a resume inside the extension is exact."""

import json
import shutil

import numpy as np
import pytest

from tests.trainer.mlm_data import (
    TINY,
    Preempted,
    preempt_at,
    repetitive_sequences,
    task_args,
    write_split,
)
from tests.trainer.pretraining.test_preemption import same_on_every_backend
from trainer.models import model_source
from trainer.pretraining import task

pytestmark = pytest.mark.slow  # five tiny trainings (~10 s each)

LONG = 64  # the corpus fixture's rows hold 32 tokens
SHORT_CONFIG = json.dumps({**json.loads(TINY), "global_rope_theta": 10_000.0})
LONG_CONFIG = json.dumps({**json.loads(TINY), "global_rope_theta": 160_000.0})


@pytest.fixture(scope="module")
def long_data(corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("long")
    write_split(
        str(root / "train"), *repetitive_sequences(512, seed=3, length=LONG), corpus["info"]
    )
    ids, mask = repetitive_sequences(64, seed=4, length=LONG)
    write_split(str(root / "eval"), ids, mask, corpus["info"], split="validation")
    return {**corpus, "train": str(root / "train"), "eval": str(root / "eval")}


def _args(data, out, config, steps, *extra):
    args = task_args(data, out, "--family", "modernbert", "--decay_ratio", "0", *extra)
    at = args.index("--config")
    args[at + 1] = config
    return args + ["--train_steps", str(steps), "--eval_every", "20", "--save_every", "20"]


@pytest.fixture(scope="module")
def phase_one(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("phase-one") / "run"
    assert task.main(_args(corpus, out, SHORT_CONFIG, 40)) == 0
    return out


def _extended(long_data, folder, *extra):
    return _args(long_data, folder, LONG_CONFIG, 80, "--extend_context", *extra)


@pytest.fixture(scope="module")
def extended(phase_one, long_data, tmp_path_factory):
    """Phase one extended without a stop, 40 -> 80 at the longer length: read by both tests
    below (the tests copy it before they train on)."""
    out = tmp_path_factory.mktemp("extended") / "run"
    shutil.copytree(phase_one, out)
    assert task.main(_extended(long_data, out)) == 0
    return out


def test_an_extension_restart_trains_on_at_the_longer_length(extended, long_data, tmp_path):
    config = json.loads((extended / "run_config.json").read_text())
    assert config["max_length"] == LONG and config["data_start_step"] == 40
    assert config["backbone_config"]["global_rope_theta"] == 160_000.0
    assert config["context_extension"]["max_length"] == [32, LONG]
    starts = [(a["start_step"], a["max_length"]) for a in config["attempts"]]
    assert starts == [(0, 32), (40, LONG)]
    metrics = json.loads((extended / "metrics.json").read_text())
    assert metrics["steps"] == 80 and np.isfinite(metrics["eval_loss"])

    # Then the decay, from the stable checkpoint of step 80 over 40 updates (1 - sqrt).
    out = tmp_path / "run"
    shutil.copytree(extended, out)
    decay = ["--decay_from_step", "80", "--decay_steps", "40"]
    assert task.main(_args(long_data, out, LONG_CONFIG, 120, *decay)) == 0
    rates = {e["step"]: e["learning_rate"] for e in json.loads((out / "history.json").read_text())}
    peak = rates[80]
    assert rates[60] == pytest.approx(peak)  # held through the extension
    assert rates[100] == pytest.approx(peak * (1 - np.sqrt(20 / 40)))
    assert rates[120] == pytest.approx(0.0, abs=1e-12)
    config = json.loads((out / "run_config.json").read_text())
    assert (config["decay_start_step"], config["decay_num_steps"], config["data_start_step"]) == (
        80,
        40,
        40,
    )
    assert [a["start_step"] for a in config["attempts"]] == [0, 40, 80]


def test_a_resume_inside_the_extension_is_exact(phase_one, extended, long_data, tmp_path):
    """Stopped at 60 (inside the extension) and resumed: the weights of the uninterrupted
    extension (the `extended` fixture)."""
    resumed = tmp_path / "resumed"
    shutil.copytree(phase_one, resumed)
    with pytest.raises(Preempted):
        task.run(task.parse_args(_extended(long_data, resumed)), [preempt_at(60)])
    assert task.main(_extended(long_data, resumed)) == 0
    assert json.loads((resumed / "run_config.json").read_text())["data_start_step"] == 40
    final = model_source.load_masked_lm(str(resumed))[0].get_weights()
    expected = model_source.load_masked_lm(str(extended))[0].get_weights()
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(final, expected)) < 2e-4


WIDER = json.dumps({**json.loads(LONG_CONFIG), "num_heads": 4})


@same_on_every_backend  # the plan's checks: the same code on either backend
@pytest.mark.parametrize(
    "config, extra, named",
    [
        (SHORT_CONFIG, [], "--max_length"),  # no --extend_context: new data is refused
        (LONG_CONFIG, ["--extend_context", "--seed", "7"], "--seed"),
        (WIDER, ["--extend_context"], "--config"),  # the shape is not the extension's
    ],
)
def test_anything_else_stays_refused_in_one_line(
    phase_one, long_data, tmp_path, capsys, config, extra, named
):
    out = tmp_path / "run"
    shutil.copytree(phase_one, out)
    assert task.main(_args(long_data, out, config, 80, *extra)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0], err
