"""`make bench-finetune` (benchmarks/bench_finetune.py): both sides time the model they claim
(trainer.finetune's classifier on the pretrained backbone; the HF export in PyTorch), in a tiny
form, and the report puts them side by side with the ratio."""

import os

import pytest

from benchmarks import bench_finetune
from tests.trainer.models.test_checkpoints import make_training_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return make_training_dir(str(tmp_path_factory.mktemp("bench")), "roberta")[0]


def quick(run_dir, *extra):
    return bench_finetune.BenchFlags(model=run_dir, quick=True, **dict(extra))


@pytest.mark.slow
def test_keras_side_times_the_finetune_model(run_dir):
    import keras

    result = bench_finetune.time_keras(quick(run_dir))
    assert result["side"] == keras.backend.backend()
    assert result["examples_per_second"] > 0 and result["seq"] > 8
    assert result["jit_compile"] == (keras.backend.backend() == "jax")


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax", reason="PyTorch only; run on the TensorFlow pass"
)
def test_torch_side_times_the_hf_export_and_the_report_has_the_ratio(run_dir):
    torch_side = bench_finetune.time_torch(quick(run_dir))
    assert torch_side["side"] == "torch" and torch_side["examples_per_second"] > 0
    keras_side = dict(
        torch_side,
        side="tensorflow",
        jit_compile=False,
        examples_per_second=2 * torch_side["examples_per_second"],
    )
    one_thread = dict(
        torch_side,
        side="torch1",
        threads=1,
        examples_per_second=torch_side["examples_per_second"] / 2,
    )
    lines = bench_finetune.report(
        quick(run_dir), {"tensorflow": keras_side, "torch": torch_side, "torch1": one_thread}
    )
    assert "batch 4" in lines[0] and " 2.00x PyTorch" in lines[1] and "1.00x" in lines[2]
    assert "1 thread(s)" in lines[3] and "0.50x" in lines[3]  # the faster PyTorch is 1.00x


def test_a_missing_model_is_one_line(tmp_path, capsys):
    code = bench_finetune.main(["--model", str(tmp_path / "nothing"), "--quick"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err


def test_a_length_beyond_the_model_is_one_line(run_dir, capsys):
    code = bench_finetune.main(["--model", run_dir, "--seq", "4096", "--quick"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "positions" in err and "\n" not in err
