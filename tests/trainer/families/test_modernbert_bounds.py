"""ModernBERT's own backbone arguments have bounds, in the family's record, checked with the
shared `Shape`'s: on `--config` (at parse time: one line, exit 2, no run folder), on the config
of a transformers folder that `--init_from` reads (one line naming the folder and the field),
and, for what only the machine decides (the Splash kernel), before the model is built. A run
folder whose run saved no weights does not pin its config against the corrected command."""

import json
import warnings

import keras
import pytest

from common.errors import UserError
from tests.trainer.mlm_data import task_args
from trainer import families
from trainer.families.modernbert import attention
from trainer.models import init_from
from trainer.pretraining import task

FAKE = {"train": "no-train", "eval": "no-eval", "tokenizer": "no-tokenizer"}
JAX = keras.config.backend() == "jax"


def _one_line(capsys, code) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def _refused(tmp_path, capsys, config: dict) -> str:
    out = tmp_path / "out"
    try:
        code = task.main(
            task_args(FAKE, out, "--family", "modernbert", "--train_steps", "2")
            + ["--config", json.dumps(config)]
        )
    except SystemExit as exit_:  # argparse exits from the parser
        code = exit_.code
    line = _one_line(capsys, code)
    assert not out.exists()
    return line


@pytest.mark.parametrize(
    "config, message",
    [
        # wrong results today: a band that attends to nothing, a window of 7.5, every -2nd
        # layer global, all attention dropped
        ({"local_window": -4}, "'local_window' must be at least 2 (got -4)"),
        ({"local_window": 7.5}, "'local_window' must be a JSON number without a fraction"),
        ({"global_attention_every": -2}, "'global_attention_every' must be at least 1 (got -2)"),
        ({"attention_dropout": 1.0}, "'attention_dropout' must be in [0, 1) (got 1.0)"),
        # tracebacks today
        ({"global_attention_every": 0}, "'global_attention_every' must be at least 1 (got 0)"),
        ({"vocabulary_multiple": 0}, "'vocabulary_multiple' must be at least 1 (got 0)"),
        ({"local_window": "128"}, "'local_window' must be a JSON number without a fraction"),
        ({"attention_path": "flash"}, "'attention_path' must be one of auto, portable, cudnn"),
        ({"attention_dropout": -0.5}, "'attention_dropout' must be in [0, 1) (got -0.5)"),
        ({"hidden_dim": 130}, "hidden_dim 130 must split into 2 heads of an even size"),
        ({"hidden_dim": 30}, "hidden_dim 30 must split into 2 heads of an even size"),
        (
            {"attention_path": "cudnn", "attention_dropout": 0.1},
            "attention_path 'cudnn' has no attention dropout",
        ),
        # NaN at step 1 today, with advice about the data
        ({"global_rope_theta": 0}, "'global_rope_theta' must be greater than 0 (got 0)"),
        ({"local_rope_theta": -1.0}, "'local_rope_theta' must be greater than 0 (got -1.0)"),
        ({"vocabulary_multiple": -64}, "'vocabulary_multiple' must be at least 1 (got -64)"),
    ],
)
def test_config_out_of_bounds_is_one_line_at_parse_time(tmp_path, capsys, config, message):
    line = _refused(tmp_path, capsys, config)
    assert "--config" in line and message in line, line


def test_every_argument_that_changes_the_computation_has_bounds():
    from common import flags
    from trainer.families.sizes import Shape

    record = families.get("modernbert")
    bounded = {f.name for cls in (Shape, record.argument_bounds) for f in flags.flag_fields(cls)}
    free = set(record.backbone_args()) - bounded - set(record.set_by_trainer)
    assert free == set(), f"no bounds for {free}"


def _transformers_folder(folder, older=False, **fields):
    """A ModernBERT config.json as transformers writes it (no weights: it is refused before
    they are read); `older`: the first hub configs' field names."""
    transformers = pytest.importorskip("transformers")
    config = transformers.ModernBertConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=2,
        local_attention=16,
        pad_token_id=0,
    ).to_dict()
    if older:
        for key in ("layer_types", "rope_parameters"):
            config.pop(key)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**config, **fields}))
    return folder


THETA_0 = {"rope_type": "default", "rope_theta": 0.0}


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"local_attention": -4}, "'local_window', which must be at least 2 (got -4)"),
        ({"local_attention": 7.5}, "local_attention"),
        ({"local_attention": "128"}, "local_attention"),
        ({"hidden_size": 30}, "hidden_dim 30 must split into 2 heads"),  # head dim 15
        ({"attention_dropout": -0.5}, "'attention_dropout', which must be in [0, 1)"),
        (
            {"rope_parameters": {"full_attention": THETA_0, "sliding_attention": THETA_0}},
            "'global_rope_theta', which must be greater than 0",
        ),
        ({"older": True, "global_attn_every_n_layers": 0}, "global_attn_every_n_layers=0"),
        ({"older": True, "local_rope_theta": -5.0}, "'local_rope_theta', which must be greater"),
    ],
)
def test_init_from_a_transformers_config_out_of_bounds_is_one_line(tmp_path, fields, named):
    folder = _transformers_folder(tmp_path / "released", **fields)
    with pytest.raises(init_from.InitFromError) as caught:
        init_from.resolve(str(folder))
    message = str(caught.value)
    assert named in message and str(folder / "config.json") in message, message
    assert "\n" not in message


def test_init_from_a_released_head_dim_of_15_leaves_no_run_folder(corpus, tmp_path, capsys):
    folder = _transformers_folder(tmp_path / "released", hidden_size=30)
    out = tmp_path / "out"
    args = task_args(corpus, out, "--init_from", str(folder), "--train_steps", "1")
    cut = args.index("--config")  # --init_from takes the sizes from the checkpoint
    line = _one_line(capsys, task.main(args[:cut] + args[cut + 2 :]))
    assert "hidden_dim 30 must split into 2 heads" in line and not out.exists()


def test_splash_off_a_tpu_is_one_line_before_the_model_is_built(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    args = task_args(corpus, out, "--family", "modernbert", "--train_steps", "1")
    code = task.main(args + ["--config", '{"attention_path": "splash"}'])
    line = _one_line(capsys, code)
    wanted = "needs a TPU" if JAX else "needs the JAX backend"
    assert "attention_path 'splash'" in line and wanted in line, line
    assert not out.exists()


@pytest.mark.skipif(not JAX, reason="the Splash kernel is JAX's")
def test_splash_on_a_tpu_names_the_datas_length(monkeypatch):
    import jax

    class Tpu:
        platform = "tpu"

    monkeypatch.setattr(jax, "devices", lambda *a: [Tpu()])
    splash = {"attention_path": "splash"}
    problem = attention.training_problem(splash, 100)
    assert "multiple of 128" in problem and "have 100 tokens" in problem
    assert attention.training_problem(splash, 256) is None


def test_a_run_that_saved_no_weights_does_not_pin_its_config(corpus, tmp_path, monkeypatch):
    """A start refused at step 1 (a NaN loss) left run_config.json and no weights: the
    corrected command goes past every check of the saved run, to building its model."""
    out = tmp_path / "out"
    out.mkdir()
    bad = {"family": "modernbert", "backbone_config": {"local_rope_theta": -1.0}, "seed": 42}
    (out / "run_config.json").write_text(json.dumps({**bad, "max_length": 32, "tokenizer": {}}))

    class Built(Exception):
        pass

    def build(*args):
        raise Built

    monkeypatch.setattr(task, "_build", build)
    args = task_args(corpus, out, "--family", "modernbert", "--train_steps", "1")
    with pytest.raises(Built):
        task.run(task.parse_args(args))


def test_the_probe_that_builds_the_weights_does_not_warn(corpus, tmp_path, monkeypatch):
    """The run builds the weights with one row (trainer/pretraining/task.py `_build`): of one
    token, Keras warned of a softmax over a single key in every ModernBERT run."""

    class Probed(Exception):
        pass

    def stop(*args, **kwargs):  # the optimizer is built right after the probe
        raise Probed

    monkeypatch.setattr(task, "build_optimizer", stop)
    args = task_args(corpus, tmp_path / "out", "--family", "modernbert", "--train_steps", "1")
    with warnings.catch_warnings(record=True) as caught, pytest.raises(Probed):
        warnings.simplefilter("always")
        task.run(task.parse_args(args))
    assert not [w for w in caught if "softmax" in str(w.message)]


def test_the_familys_own_refusals_of_a_transformers_config_name_its_file(tmp_path):
    folder = _transformers_folder(tmp_path / "released", norm_bias=True)
    with pytest.raises(UserError, match="norm_bias") as caught:
        init_from.resolve(str(folder))
    assert str(folder / "config.json") in str(caught.value)
