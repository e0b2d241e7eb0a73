"""--phases: a run that switches its training data and masking rate at given steps.

Two training folders of disjoint token ranges (LOW: w0..w44, HIGH: w45..w94), so a batch
says which folder it came from. The reference run: masking 0.3 on LOW, then from step 15 HIGH
at 0.15, then from step 30 the same stream at 0.3 again (a rate seen before reuses its
compiled step), with a warmup-stable-decay schedule whose decay starts at step 30 too. What
fit is given is recorded (each `fit` call's dataset, read again from its start after the
run); the masked fraction the compiled step used is a metric of a subclass of the trainer's
model (history.json), and the rates its train step was traced at are counted."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

from common import tokenizer_files
from tests.trainer.mlm_data import SEQ_LEN, TINY, make_tokenizer, write_split
from tests.trainer.pretraining.test_preemption import same_on_every_backend
from trainer.data import splits
from trainer.models.checkpoints import update_count
from trainer.pretraining import phases, task
from trainer.pretraining.plan import PlanError
from trainer.pretraining.train_step import MaskedLMTrainer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WORDS = SEQ_LEN - 4  # [CLS] 28 words [SEP] [PAD] [PAD]: 28 maskable tokens in every row
HIGH_FIRST_ID = 5 + 45
PHASES = "15:{high}:0.15;30::0.3"
STEPS = ["--train_steps", "40", "--save_every", "10", "--eval_every", "20"]
TRACED = []  # the masking rate of each trace of a training step (`Observed`)
WSD = ["--schedule", "wsd", "--decay_ratio", "0.25", "--warmup_ratio", "0.05"]


def _rows(num: int, seed: int, first_word: int):
    rng = np.random.default_rng(seed)
    ids = np.zeros((num, SEQ_LEN), np.int64)
    ids[:, 0], ids[:, WORDS + 1] = 2, 3
    starts = rng.integers(0, 45, num)
    ids[:, 1 : WORDS + 1] = 5 + first_word + (starts[:, None] + np.arange(WORDS)) % 45
    mask = (np.arange(SEQ_LEN) < WORDS + 2).astype(np.int64)[None].repeat(num, 0)
    return ids, mask


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("phases")
    info = make_tokenizer(root / "tokenizer")
    write_split(str(root / "low"), *_rows(512, 0, 0), info)
    write_split(str(root / "high"), *_rows(512, 1, 45), info)
    write_split(str(root / "eval"), *_rows(64, 2, 0), info, num_shards=1, split="validation")
    # What a phase must not read: shorter sequences, another tokenizer's ids.
    write_split(str(root / "short"), *(a[:, :16] for a in _rows(64, 3, 0)), info)
    other = dataclasses.replace(info, fingerprint="0" * 64)
    write_split(str(root / "other_tokenizer"), *_rows(64, 3, 0), other)
    return root


def _args(root, out, *extra) -> list[str]:
    return [
        "--train_data",
        str(root / "low"),
        "--eval_data",
        str(root / "eval"),
        "--tokenizer",
        str(root / "tokenizer"),
        "--output_dir",
        str(out),
        "--model",
        "tiny",
        "--config",
        TINY,
        "--strategy",
        "cpu",
        "--per_replica_batch_size",
        "8",
        "--learning_rate",
        "1e-2",
        "--mlm_probability",
        "0.3",
        "--max_eval_batches",
        "2",
        "--verbose",
        "0",
        *extra,
    ]


def _phased(root, out, *extra) -> list[str]:
    return _args(root, out, *STEPS, *WSD, "--phases", PHASES.format(high=root / "high"), *extra)


class Observed(MaskedLMTrainer):
    """The trainer's model with one more metric: the share of maskable tokens the step masked
    (every row of these folders holds 28)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.masked_fraction = keras.metrics.Mean(name="masked_fraction")

    def mask(self, inputs):
        if "step" in inputs:  # runs when a step is traced, not at each step
            TRACED.append(self.train_spec.rate)
        return super().mask(inputs)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        masked = keras.ops.sum(y_pred["mask_weights"], axis=1) / WORDS
        self.masked_fraction.update_state(masked)
        return super().compute_metrics(x, y, y_pred, sample_weight)


def _observe(monkeypatch) -> dict:
    """{first step of a fit call: (its folder, the dataset fit was given)}, and the masked
    fraction in history.json."""
    seen = {}
    make = splits.train_dataset_fn

    def recording(source, batch, seed, start_step, *rest):
        dataset_fn = make(source, batch, seed, start_step, *rest)

        def recorded(share):
            dataset = dataset_fn(share)
            seen[start_step] = (source.split_dir, dataset)
            return dataset

        return recorded

    monkeypatch.setattr(splits, "train_dataset_fn", recording)
    monkeypatch.setattr(task, "MaskedLMTrainer", Observed)
    return seen


@pytest.fixture
def observed(monkeypatch):
    return _observe(monkeypatch)


def _first_batch(dataset) -> dict:
    return {k: np.asarray(v) for k, v in next(iter(dataset)).items()}


def _read(out, name):
    return json.loads((out / name).read_text())


class _CopyAt(keras.callbacks.Callback):
    """Copies the run folder at the end of the interval of `step`, after its files: what a
    clean stop there (a preemption at an interval end) leaves, without running it again."""

    def __init__(self, step, source, target):
        super().__init__()
        self.step, self.source, self.target = step, source, target

    def on_epoch_end(self, epoch, logs=None):
        if update_count(self.model.optimizer) == self.step:
            shutil.copytree(self.source, self.target, ignore=shutil.ignore_patterns("_LOCK"))


@pytest.fixture(scope="module")
def reference(folders, tmp_path_factory):
    """The uninterrupted run, its batches as recorded, the rates its train step was traced
    at, and a copy of its folder as it was at step 20."""
    out, stopped = tmp_path_factory.mktemp("reference"), tmp_path_factory.mktemp("at20") / "run"
    TRACED.clear()
    with pytest.MonkeyPatch.context() as patch:
        seen = _observe(patch)
        config = task.parse_args(_phased(folders, out))
        task.run(config, extra_callbacks=[_CopyAt(20, out, stopped)])
        batches = {step: (folder, _first_batch(ds)) for step, (folder, ds) in seen.items()}
    return out, batches, list(TRACED), stopped


# --- (a) the flag: syntax, then the folders and steps, each one line and exit 2 -----------


@same_on_every_backend
def test_the_flag_reads_steps_folders_and_rates():
    assert phases.parse("30000:gs://b/decay/train:0.15; 60000::0.05;") == (
        phases.PhaseFlag(30000, "gs://b/decay/train", 0.15),
        phases.PhaseFlag(60000, None, 0.05),
    )
    assert phases.parse("10:gs://b/x") == (phases.PhaseFlag(10, "gs://b/x", None),)
    assert phases.parse("10:data:") == (phases.PhaseFlag(10, "data", None),)
    assert phases.parse(None) == phases.parse("") == ()


@same_on_every_backend
@pytest.mark.parametrize(
    "flag, said",
    [
        ("0:{low}", "must start after step 0"),
        ("-5:{low}", "must start after step 0"),
        ("20:{high};20::0.1", "phase 2 starts at step 20; each phase must start after step 20"),
        ("x:{high}", "is not STEP:DATA:RATE"),
        ("20:{high}:1.5", "the masking rate must be in (0, 1) (got 1.5)"),
        ("20:{high}:0", "the masking rate must be in (0, 1)"),
        ("20::", "changes neither the data nor the masking rate"),
        ("40:{high}", "phase 1 starts at step 40, at or after the run's last step (40)"),
        ("20:{root}/nowhere", "phase 1 ({root}/nowhere): {root}/nowhere holds no"),
        ("20:{root}/short", "holds sequences of length 16, but 32 was asked for"),
        ("20:{root}/other_tokenizer", "phase 1 ({root}/other_tokenizer)"),
    ],
)
def test_bad_phases_are_one_line_and_exit_2(folders, tmp_path, capsys, flag, said):
    names = {"low": folders / "low", "high": folders / "high", "root": folders}
    args = _args(folders, tmp_path / "run", *STEPS, "--phases=" + flag.format(**names))
    try:
        status = task.main(args)
    except SystemExit as stop:  # a usage error of the flag's syntax, from argparse
        status = stop.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1, err
    assert said.format(**names) in err[0] and "--phases" in err[0], err[0]
    assert not (tmp_path / "run" / "run_config.json").exists()


@same_on_every_backend
def test_a_phase_that_has_trained_is_fixed_and_a_future_one_may_change():
    def record(phase, start, digest="b", rate=0.15):
        return {
            "phase": phase,
            "start_step": start,
            "train_data_digest": digest,
            "data_start_step": start,
            "mlm_probability": rate,
        }

    saved = [record(0, 0, "a", 0.3), record(1, 15), record(2, 30, rate=0.05)]
    phases.check_restart(saved, saved[:2] + [record(2, 35, rate=0.1)], 20, "run")  # future
    phases.check_restart(saved, saved[:2], 30, "run")  # phase 2 has not trained a step yet
    phases.check_restart(None, [saved[0], record(1, 25)], 20, "run")  # added after the resume
    for changed in (
        [saved[0], record(1, 15, rate=0.2)],  # its rate
        [saved[0], record(1, 15, digest="c")],  # its data
        [saved[0], record(1, 10)],  # its start
        [saved[0]],  # dropped
    ):
        with pytest.raises(PlanError, match="give those phases as before"):
            phases.check_restart(saved, changed, 20, "run")
    with pytest.raises(PlanError, match=r"with the phases \[\], not \[from step 15, data b"):
        phases.check_restart(None, [saved[0], record(1, 15)], 20, "run")  # added in the past


# --- (b) the switch: the first batches of a phase come from its folder, at its start ------


@pytest.mark.slow  # a training run: left to make test
def test_the_new_phase_reads_its_folder_from_its_beginning(reference, folders):
    out, batches = reference[:2]
    assert sorted(batches) == [0, 10, 15, 20, 30]  # fit calls cut at the phase starts
    for step, (folder, batch) in batches.items():
        words = batch["input_ids"][:, 1 : WORDS + 1]
        assert folder == str(folders / ("high" if step >= 15 else "low"))
        assert (words >= HIGH_FIRST_ID).all() == (step >= 15), step
        assert (words < HIGH_FIRST_ID).all() == (step < 15), step
        assert (batch["step"] == step).all()  # the run's own step: the masking keys run on
    info = tokenizer_files.load(str(folders / "tokenizer"))[1]
    high = splits.resolve_split(str(folders / "high"), info, SEQ_LEN)
    start = _first_batch(splits.train_dataset(high, 8, 42, 0))
    np.testing.assert_array_equal(batches[15][1]["input_ids"], start["input_ids"])
    # Phase 2 keeps the data: its stream reads on from where phase 1's was at step 30.
    on = _first_batch(splits.train_dataset(high, 8, 42, 30, stream_start=15))
    assert (on["step"] == 30).all()
    np.testing.assert_array_equal(batches[30][1]["input_ids"], on["input_ids"])

    config = _read(out, "run_config.json")
    recorded = [
        (p["phase"], p["start_step"], os.path.basename(p["train_data"]), p["mlm_probability"])
        for p in config["data_phases"]
    ]
    assert recorded == [(0, 0, "low", 0.3), (1, 15, "high", 0.15), (2, 30, "high", 0.3)]
    assert all(p["reached"] for p in config["data_phases"][1:])
    assert (config["decay_start_step"], config["decay_num_steps"]) == (30, 10)  # with wsd
    history = _read(out, "history.json")
    assert [(e["step"], e["phase"]) for e in history] == [
        (10, 0),
        (15, 0),
        (20, 1),
        (30, 1),
        (40, 2),
    ]


# --- (d) the masking rate of each phase is the one its compiled step used -----------------


@pytest.mark.slow  # a training run: left to make test
def test_each_phase_masks_at_its_rate_and_evaluation_at_the_runs(reference):
    history = _read(reference[0], "history.json")
    fraction = {e["step"]: e["masked_fraction"] for e in history}
    print("masked fraction by interval end:", fraction)
    assert [fraction[10], fraction[15]] == pytest.approx([0.3, 0.3], abs=0.01)
    assert [fraction[20], fraction[30]] == pytest.approx([0.15, 0.15], abs=0.01)
    assert fraction[40] == pytest.approx(0.3, abs=0.01)
    evaluated = [e["eval_masked_fraction"] for e in history if "eval_loss" in e]
    assert len(set(evaluated)) == 1 and evaluated[0] == pytest.approx(0.3, abs=0.01)
    # One compiled train step per distinct rate: phase 2's 0.3 reuses phase 0's step.
    traced = reference[2]
    assert [r for i, r in enumerate(traced) if not i or traced[i - 1] != r] == [0.3, 0.15]


# --- (c) a resume inside phase 1 reads the same batches and gives the same losses ---------


def _resumed_run(reference, folders, out, observed):
    """JAX: SIGKILLed at step 25 (the backup of step 20 is the newest; `make test` gives JAX
    a compilation cache, so the child compiles little); TensorFlow: the reference's folder as
    a clean stop at the end of step 20 left it. Then the same command, in this process."""
    args = _phased(folders, out)
    if keras.backend.backend() == "jax":
        killed = subprocess.run(
            [sys.executable, "-m", "tests.trainer.killable_run", "mid_interval:25", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert killed.returncode == -9, killed.stderr[-3000:]
    else:
        shutil.copytree(reference[3], out)
    observed.clear()
    assert task.main(args) == 0
    return args


@pytest.mark.slow  # a training run: left to make test
def test_a_resume_inside_a_phase_reads_the_same_batches_and_losses(
    reference, folders, tmp_path, observed, capsys
):
    out = tmp_path / "run"
    args = _resumed_run(reference, folders, out, observed)
    assert "phase 1 from step 15" in capsys.readouterr().out  # said when resuming in it
    assert sorted(observed) == [20, 30]
    for step, (folder, dataset) in observed.items():
        assert folder == reference[1][step][0]
        got, want = _first_batch(dataset), reference[1][step][1]
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
    history, expected = _read(out, "history.json"), _read(reference[0], "history.json")
    assert [e["step"] for e in history] == [e["step"] for e in expected]
    for got, want in zip(history, expected):
        for key in {"loss", "phase", "learning_rate", "eval_loss"} & set(want):
            assert got[key] == pytest.approx(want[key], rel=1e-5), (got["step"], key)
    attempts = _read(out, "run_config.json")["attempts"]
    assert [a["start_step"] for a in attempts] == [0, 20]

    # Changing a phase that has trained is refused, touching nothing.
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    changed = args[:-1] + [PHASES.format(high=folders / "high").replace("0.15", "0.2")]
    assert task.main(changed) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give those phases as before" in err[0], err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


# --- the model card states the phases that trained the exported weights -------------------


@pytest.mark.slow  # a training run: left to make test
def test_the_card_states_each_phase_with_its_steps_data_and_rate(reference):
    from trainer.release import card_facts, card_text
    from trainer.run_folder.run_record import RunRecord

    record = RunRecord.read(str(reference[0] / "run_config.json"))
    facts = card_facts.CardFacts(record, 1, {}, 40, None, None, None, None)
    text = card_text.recipe_section(facts)
    print(text)
    low, high = record.data_phases[0]["train_data"], record.data_phases[1]["train_data"]
    assert "0.3 of tokens (phase 0 and evaluation; by phase below)" in text
    assert f"| 0 | 0-15 | `{low}` | 0.3 |" in text
    assert f"| 1 | 15-30 | `{high}` | 0.15 |" in text
    assert f"| 2 | 30-40 | `{high}` (read on from step 15) | 0.3 |" in text
    early = card_facts.CardFacts(record, 1, {}, 10, None, None, None, None)
    assert "Phases" not in card_text.recipe_section(early)  # weights of step 10: phase 0 only
