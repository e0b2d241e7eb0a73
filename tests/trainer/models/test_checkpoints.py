"""Finding and loading checkpoints of fake training runs (tiny models, tiny tokenizers).

`make_training_dir` writes exactly the trainer's layout; test_export.py and test_predict.py
import it.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from common import fs, tokenizer_files
from tests.support.full_disk import FullDiskFile
from trainer import families
from trainer.models import checkpoints, model_source
from trainer.models.model import backbone_config, build_masked_lm
from trainer.run_folder.run_dir import RunDir

MAX_LENGTH = 32
TINY = dict(num_layers=2, hidden_dim=32, num_heads=2, intermediate_dim=64)
STEPS = (900, 1000)  # 8-digit names: 1000 must win over 900
TEXTS = [
    "The cat sat on the mat.",
    "The dog sat on the log.",
    "A bird sang in the tree near the house.",
    "Paris is the capital of France and Rome is the capital of Italy.",
    "The quick brown fox jumps over the lazy dog.",
    "She sells sea shells by the sea shore.",
    "Models learn to predict the missing word in a sentence.",
    "The weather today is sunny with a light breeze from the west.",
] * 5


def train_tokenizer(family: str):
    """A tiny tokenizer with the repo's special tokens: byte-level BPE or WordPiece."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    kind = "bpe" if family == "roberta" else "wordpiece"
    special = tokenizer_files.SPECIAL_TOKENS[kind]
    order = list(dict.fromkeys(special.values()))  # ids 0..4
    if kind == "bpe":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=320,
            special_tokens=order,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
    else:
        tokenizer = Tokenizer(models.WordPiece(unk_token=special["unk_token"]))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(
            vocab_size=200, special_tokens=order, show_progress=False
        )
    tokenizer.train_from_iterator(TEXTS, trainer)
    cls, sep = special["cls_token"], special["sep_token"]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}",
        pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, order.index(cls)), (sep, order.index(sep))],
    )
    return tokenizer, special


def randomize(masked_lm, seed: int, scale: float = 0.1) -> None:
    """Adds noise to every weight (biases, layer norms too) so no test passes by accident."""
    rng = np.random.default_rng(seed)
    for variable in masked_lm.weights:
        noise = rng.normal(0.0, scale, variable.shape).astype("float32")
        variable.assign(variable.numpy() + noise)


def make_training_dir(root: str, family: str):
    """Writes run_config.json, tokenizer/ and checkpoints/ckpt-*.weights.h5 like the trainer.

    Returns (output_dir, masked_lm) where masked_lm holds the latest checkpoint's weights.
    """
    output_dir = os.path.join(root, f"run-{family}")
    tokenizer, special = train_tokenizer(family)
    fp = tokenizer_files.save(tokenizer, os.path.join(output_dir, "tokenizer"), special, 512)
    _, info = tokenizer_files.load(os.path.join(output_dir, "tokenizer"))
    assert info.fingerprint == fp
    record = families.get(family)
    config = backbone_config(record, "tiny", info.vocab_size, MAX_LENGTH, TINY)
    fs.write_json(
        os.path.join(output_dir, "run_config.json"),
        {
            "family": family,
            "size": "tiny",
            "backbone_config": config,
            "max_length": MAX_LENGTH,
            "tokenizer": info.to_dict(),
            "seed": 1,
        },
    )
    import keras

    keras.utils.set_random_seed(7)  # the same initial weights every run: no flaky near-ties
    masked_lm = build_masked_lm(record, config)
    for step in STEPS:
        randomize(masked_lm, seed=step)
        checkpoints.publish(masked_lm, RunDir(output_dir).checkpoint(step))
    return output_dir, masked_lm


def assert_same_weights(a, b):
    assert [v.path for v in a.weights] == [v.path for v in b.weights]
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=x.path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("runs"))
    return {family: make_training_dir(root, family) for family in ("roberta", "bert")}


def test_latest_checkpoint_is_highest_step(runs, tmp_path):
    output_dir, _ = runs["roberta"]
    latest = checkpoints.latest_checkpoint(output_dir)
    assert latest.endswith("checkpoints/ckpt-00001000.weights.h5")
    assert checkpoints.latest_checkpoint(str(tmp_path)) is None


@pytest.mark.parametrize("family", ["roberta", "bert"])
def test_load_output_dir_gives_latest_checkpoint(runs, family):
    output_dir, trained = runs[family]
    masked_lm, record, tokenizer_dir = model_source.load_masked_lm(output_dir)
    assert type(masked_lm) is type(trained)
    assert_same_weights(masked_lm, trained)
    assert record.family.name == family and record.size == "tiny"
    assert tokenizer_dir == os.path.join(output_dir, "tokenizer")


def test_load_one_checkpoint_file(runs):
    output_dir, trained = runs["roberta"]
    path = os.path.join(output_dir, "checkpoints", "ckpt-00000900.weights.h5")
    masked_lm, record, _ = model_source.load_masked_lm(path)
    # The earlier step: weights differ from the latest ones by the last step's noise.
    first = masked_lm.weights[0].numpy()
    assert not np.array_equal(first, trained.weights[0].numpy())
    assert model_source.resolve(path).path == path
    assert record.max_length == MAX_LENGTH


def test_errors_are_one_sentence(runs, tmp_path):
    output_dir, _ = runs["roberta"]
    empty_run = tmp_path / "run"
    empty_run.mkdir()
    (empty_run / "run_config.json").write_text("{}")
    cases = {
        str(tmp_path / "nothing"): "neither a training output dir",
        str(empty_run): "has no readable checkpoint",
        str(tmp_path / "ckpt-00000001.weights.h5"): "does not exist",
    }
    (tmp_path / "nothing").mkdir()
    stray = tmp_path / "elsewhere" / "ckpt-00000001.weights.h5"  # no run_config.json 2 up
    stray.parent.mkdir()
    stray.write_bytes(b"")
    cases[str(stray)] = "not a readable weight file"
    inside = tmp_path / "elsewhere" / "ckpt-00000002.weights.h5"
    shutil.copy(os.path.join(output_dir, "checkpoints", "ckpt-00000900.weights.h5"), inside)
    cases[str(inside)] = "is not inside a training output dir"
    for path, message in cases.items():
        with pytest.raises(model_source.ModelNotFoundError, match=message) as error:
            model_source.load_masked_lm(path)
        assert "\n" not in str(error.value)


def _truncate(path: str) -> None:
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def test_torn_newest_checkpoint_is_skipped_then_one_line(runs, tmp_path, capsys):
    source_dir, _ = runs["roberta"]
    output_dir = str(tmp_path / "run")
    shutil.copytree(source_dir, output_dir)
    run = RunDir(output_dir)
    _truncate(run.checkpoint(1000))  # a torn file, as a non-atomic writer would leave
    assert model_source.resolve(output_dir).path == run.checkpoint(900)
    assert "skipping unreadable" in capsys.readouterr().err
    masked_lm, _, _ = model_source.load_masked_lm(output_dir)  # loads, no h5py traceback
    _truncate(run.checkpoint(900))
    with pytest.raises(model_source.ModelNotFoundError, match="2 found .* none readable"):
        model_source.resolve(output_dir)
    from trainer.release import export

    assert export.main(["--checkpoint", output_dir, "--output_dir", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and "none readable" in err[-1]


def _small_model(seed: int):
    import keras

    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(4)])
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def test_publish_stages_nothing_in_the_system_temp_folder(tmp_path, monkeypatch):
    """A TPU VM's boot disk is small: the weights go from memory to a name beside their
    target (here the system temp folder does not exist, so any staging there fails)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-temp"))
    path = str(tmp_path / "run" / "backup" / "state-00000010.weights.h5")
    model = _small_model(1)
    checkpoints.publish(model, path)
    assert checkpoints.unreadable_reason(path) is None
    copy = _small_model(2)
    checkpoints.load_weights(copy, path)
    for x, y in zip(
        model.weights + model.optimizer.variables, copy.weights + copy.optimizer.variables
    ):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert os.listdir(os.path.dirname(path)) == ["state-00000010.weights.h5"]


def test_a_full_disk_while_publishing_names_the_file_and_keeps_the_previous_one(
    tmp_path, monkeypatch
):
    import builtins
    import errno

    path = str(tmp_path / "ckpt-00000010.weights.h5")
    checkpoints.publish(_small_model(1), path)
    before = open(path, "rb").read()

    monkeypatch.setattr(
        fs, "open", lambda *a, **k: FullDiskFile(builtins.open(*a, **k)), raising=False
    )
    with pytest.raises(OSError) as raised:
        checkpoints.publish(_small_model(2), path)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == path
    assert open(path, "rb").read() == before
    assert os.listdir(tmp_path) == [os.path.basename(path)]


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax",
    reason="run_cli's mapping is backend-free; the JAX pass spent 14 s here",
)
def test_a_read_only_output_stops_the_trainer_in_one_line(corpus, tmp_path, monkeypatch, capsys):
    """Every write of the run goes through whole-file writes: a read-only --output_dir is one
    line naming the file, exit 2, and nothing is left there."""
    import builtins
    import errno

    from tests.trainer.mlm_data import STEPS, task_args
    from trainer.pretraining import task

    out = tmp_path / "run"

    def read_only(path, mode="r", *args, **kwargs):
        if "w" in mode and str(path).startswith(str(out)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return builtins.open(path, mode, *args, **kwargs)

    monkeypatch.setattr(fs, "open", read_only, raising=False)
    assert task.main(task_args(corpus, out, *STEPS)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: cannot write {out}/"), err
    assert "read-only file system" in err[0]
    assert not [p for p in out.rglob("*") if p.is_file()]
