"""The trainer's flags through the real entry point (`task.main`): values that cannot work are
one line on stderr and exit status 2, before any file is read or written.
Every case here stops at parse time, so each costs milliseconds."""

import json
import os
import sys

import pytest

from tests.trainer.mlm_data import task_args
from trainer.pretraining import task
from trainer.startup import keras_backend

FAKE = {"train": "no-train", "eval": "no-eval", "tokenizer": "no-tokenizer"}


def _refused(tmp_path, capsys, *extra) -> str:
    """The one error line of `task.main` on the tiny run's flags plus `extra` (flags after
    `--config TINY` win), checked to exit 2 and to leave the output folder untouched."""
    out = tmp_path / "out"
    try:
        code = task.main(task_args(FAKE, out, "--train_steps", "2", *extra))
    except SystemExit as exit_:  # a usage error: argparse exits from the parser
        code = exit_.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert not out.exists()
    return err[0]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--mlm_probability", "0"], "--mlm_probability must be in (0, 1] (got 0.0)"),
        (["--mlm_probability", "1.5"], "--mlm_probability must be in (0, 1] (got 1.5)"),
        (["--learning_rate", "-1"], "--learning_rate must be greater than 0 (got -1.0)"),
        (["--warmup_ratio", "2"], "--warmup_ratio must be in [0, 1] (got 2.0)"),
        (["--max_eval_batches", "0"], "--max_eval_batches must be at least 1 (got 0)"),
        (["--adam_beta2", "1"], "--adam_beta2 must be in [0, 1) (got 1.0)"),
        (["--per_replica_batch_size", "0"], "--per_replica_batch_size must be at least 1 (got 0)"),
    ],
)
def test_out_of_bounds_flags_are_refused(tmp_path, capsys, flags, message):
    assert message in _refused(tmp_path, capsys, *flags)


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"num_layer": 1},
            "--config 'num_layer' is not an argument of keras_hub.models."
            "RobertaBackbone (did you mean 'num_layers'?",
        ),
        ({"bogus": 1}, "--config 'bogus' is not an argument of keras_hub.models.RobertaBackbone"),
        (
            {"num_segments": 2},
            "--config 'num_segments' is not an argument",
        ),  # BERT's, not RoBERTa's
        ({"num_layers": 0}, "--config 'num_layers' must be at least 1 (got 0)"),
        ({"dropout": 1.0}, "--config 'dropout' must be in [0, 1) (got 1.0)"),
        ({"num_heads": 2.5}, "--config 'num_heads' must be a JSON number without a fraction"),
        ({"hidden_dim": 65}, "--config: hidden_dim 65 is not a multiple of num_heads 2"),
        (
            {"vocabulary_size": 10},
            "--config 'vocabulary_size': the trainer sets it from the tokenizer",
        ),
        ([1], "--config must be a JSON object"),
    ],
)
def test_backbone_config_keys_and_values_are_checked(tmp_path, capsys, config, message):
    assert message in _refused(tmp_path, capsys, "--config", json.dumps(config))


def test_the_allowed_config_keys_come_from_the_backbone_signature():
    from trainer import families

    assert "num_segments" in families.get("bert").backbone_args()
    assert "num_segments" not in families.get("roberta").backbone_args()
    assert "name" not in families.get("roberta").backbone_args()  # **kwargs: layer options
    config = task.parse_args(
        task_args(
            FAKE,
            "o",
            "--train_steps",
            "1",
            "--family",
            "bert",
            "--config",
            '{"num_segments": 1, "dropout": 0.0}',
        )
    )
    assert config.model.config == {"num_segments": 1, "dropout": 0.0}


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--cpu_replicas", "0"], "--cpu_replicas must be at least 1 (got 0)"),
        (["--seed", "-1"], "--seed must be in [0, 2147483647] (got -1)"),
        (["--seed", str(2**32)], "--seed must be in [0, 2147483647] (got 4294967296)"),
        (["--seed", str(2**31)], "--seed must be in [0, 2147483647]"),  # masking keys are int32
        (["--eval_seed", str(2**31)], "--eval_seed must be in [0, 2147483647]"),
    ],
)
def test_values_that_raised_tracebacks_are_one_line(tmp_path, capsys, flags, message):
    assert message in _refused(tmp_path, capsys, *flags)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--push_to", "hf://org/name.git"], "'org/name.git' is not a valid Hub repository"),
        (["--push_to", "hf://org/name\n"], r"'org/name\n' is not a valid Hub repository"),
        (["--push_to", "hf://org/m", "--language", "english"], "--language 'english' is not"),
        (["--push_to", "hf://org/m", "--license", "apache"], "--license 'apache' is not"),
    ],
)
def test_push_target_and_card_metadata_are_refused_before_training(
    tmp_path, capsys, flags, message
):
    assert message in _refused(tmp_path, capsys, *flags)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--max_eval_batches", "-1"], "--max_eval_batches must be at least 1 (got -1)"),
        (["--keep_checkpoints", "0"], "--keep_checkpoints must be at least 1 (got 0)"),
    ],
)
def test_messages_name_the_flag_at_fault(tmp_path, capsys, flags, message):
    assert message in _refused(tmp_path, capsys, *flags)


def test_the_last_backend_flag_wins_as_argparse_takes_it():
    argv = ["--train_data", "d", "--backend", "tensorflow", "--backend=jax"]
    assert keras_backend.from_argv(argv) == "jax"
    assert keras_backend.from_argv(argv + ["--backend", "tensorflow"]) == "tensorflow"
    assert keras_backend.from_argv(["--train_data", "d"]) is None


@pytest.mark.parametrize("name", ["torch", "numpy", "openvino"])
def test_an_unsupported_keras_backend_is_one_line(tmp_path, capsys, monkeypatch, name):
    """KERAS_BACKEND=torch used to end in ModuleNotFoundError when the trainer imported Keras
    (numpy: a KeyError later). `choose` runs as at a fresh start (Keras not imported yet):
    it hands Keras a backend it can import, and the command refuses the run in one line."""
    monkeypatch.setenv("KERAS_BACKEND", name)
    monkeypatch.delitem(sys.modules, "keras")
    monkeypatch.setattr(keras_backend, "_refused", None)
    assert keras_backend.choose(["--train_data", "d"]) == "tensorflow"
    assert os.environ["KERAS_BACKEND"] == "tensorflow"  # what the first `import keras` reads
    assert _refused(tmp_path, capsys) == (
        f"error: KERAS_BACKEND={name} is not a backend of this trainer; use tensorflow or jax "
        "(KERAS_BACKEND or --backend); see python -m trainer.task --help"
    )
    assert keras_backend.choose(["--backend", "jax"]) == "jax"  # the flag wins over it
    assert keras_backend._refused is None


@pytest.mark.parametrize("command", ["export", "predict", "fill_mask_demo", "finetune"])
def test_every_model_command_refuses_an_unsupported_keras_backend(
    tmp_path, capsys, monkeypatch, command
):
    """Not only trainer.task: a command that loads a model refuses KERAS_BACKEND=torch in one
    line before it reads anything, instead of running quietly on the default backend."""
    import importlib

    monkeypatch.setattr(keras_backend, "_refused", "torch")
    argv = {
        "export": ["--checkpoint", str(tmp_path), "--output_dir", str(tmp_path / "x")],
        "predict": ["--model", str(tmp_path), "a <mask>"],
        "fill_mask_demo": [
            "--model",
            str(tmp_path),
            "--corpus",
            str(tmp_path / "c"),
            "--validation_fraction",
            "0.1",
        ],
        "finetune": [
            "--model",
            str(tmp_path),
            "--train",
            str(tmp_path / "t.jsonl"),
            "--dev",
            str(tmp_path / "d.jsonl"),
            "--output_dir",
            str(tmp_path / "x"),
        ],
    }[command]
    assert importlib.import_module(f"trainer.{command}").main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: KERAS_BACKEND=torch is not a backend"), err
    assert not (tmp_path / "x").exists()


def test_the_flags_are_resolved_once_and_then_frozen():
    """A command's flags are one typed value that no module changes on its way (a change is a
    copy: `dataclasses.replace`)."""
    import dataclasses

    from trainer.finetuning.config import FinetuneFlags

    args = task_args({"train": "t", "eval": "e", "tokenizer": "k"}, "o", "--decay_from_step", "8")
    config = task.parse_args([*args, "--decay_steps", "2", "--schedule", "wsd"])
    assert config.schedule.train_steps == 10  # resolved when parsed: from + steps of the decay
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.schedule.train_steps = 20
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.schedule = config.schedule
    tuned = FinetuneFlags(model="m", train="t.csv", dev="d.csv", output_dir="o")
    assert tuned.metric == "accuracy"  # the kind's default metric, resolved when made
    with pytest.raises(dataclasses.FrozenInstanceError):
        tuned.metric = "f1"
