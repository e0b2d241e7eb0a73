"""The accelerator benchmark's CPU mode, run as on the GPU machine (only its image's packages
and the carried wheels importable, TensorFlow among what is missing), its PyTorch side, and
the list of carried wheels (benchmarks/accel_wheels.py)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import accel_wheels, bench_accel
from benchmarks.accel import shapes, synthetic, theirs
from tests.support import gpu_image

jax_pass = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") != "jax",
    reason="the JAX pass runs it (the benchmark trains on JAX)",
)


def _cpu_mode(tmp_path, *flags):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_accel",
            "--cpu",
            "--batch_tokens",
            "256",
            "--vocab",
            "500",
            "--interval",
            "2",
            "--intervals",
            "2",
            "--torch",
            "no",
            "--json",
            str(tmp_path / "out.json"),
            *flags,  # last: they override the above
        ],
        env=gpu_image.env(),
        cwd=gpu_image.no_tensorflow.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@jax_pass
def test_cpu_mode_trains_our_trainer_with_only_the_gpu_machines_packages(tmp_path):
    result = _cpu_mode(tmp_path, "--configs", "tiny/64")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    row = next(line for line in result.stdout.splitlines() if line.startswith("tiny"))
    tokens, gflops, mfu = row.split("|")[1].split()
    assert float(tokens.replace(",", "")) > 0 and 0 < float(gflops)
    assert 0 < float(mfu.rstrip("%")) < 100  # against the CPU's measured float32 peak
    assert "float32 matrix-product peak JAX" in result.stdout


@jax_pass
@pytest.mark.slow
def test_cpu_mode_trains_modernbert_on_packed_documents_beside_transformers(tmp_path):
    flags = ("--family", "modernbert", "--configs", "tiny/128", "--torch", "yes")
    result = _cpu_mode(tmp_path, *flags, "--no_torch_compile")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    with open(tmp_path / "out.json") as f:
        out = json.load(f)
    ours, theirs_run = out["ours"]["runs"]["tiny/128"], out["torch"]["runs"]["tiny/128"]
    # the family's recipe on both sides; our layers took the path they record
    assert ours["mask_rate"] == theirs_run["mask_rate"] == 0.3
    assert ours["attention_paths"] == {"portable": 2}
    assert ours["examples_per_second"] > 0 and theirs_run["examples_per_second"] > 0
    row = next(line for line in result.stdout.splitlines() if line.startswith("tiny"))
    assert row.split("|")[-1].strip().endswith("x")  # both sides measured: a ratio
    assert "tiny/128 portable x2" in result.stdout


@jax_pass
def test_the_pytorch_side_trains_roberta_for_masked_lm_at_the_same_shape():
    args = bench_accel._defaults(
        bench_accel.parse(
            [
                "--batch_tokens",
                "64",
                "--vocab",
                "300",
                "--interval",
                "2",
                "--intervals",
                "2",
                "--no_torch_compile",
            ]
        ),
        accelerator=False,
    )
    result = theirs.train_torch(args, "tiny", 32, "cpu", fused=True)
    assert result["batch"] == 2 and result["examples_per_second"] > 0


def test_the_benchmark_counts_flops_of_the_trainers_sizes():
    from trainer.families.sizes import SIZES

    assert shapes.SIZES["roberta"] == SIZES
    # RoBERTa-base at 128: 6 x 85 M dense weights dominate; the head at 15 % and attention
    # add 6.8 % and 2.8 %.
    per_token = shapes.flops_per_token("roberta", "base", 128, 50265)
    assert 5.5e8 < per_token < 5.7e8
    dense = 12 * (4 * 768**2 + 2 * 768 * 3072) + 768**2
    assert shapes.dense_weights("roberta", "base") == dense
    assert per_token == 6 * dense + 6 * 768 * 50265 * 0.15 + 12 * 12 * 768 * 128


def test_modernbert_flops_count_geglu_and_local_layers_within_their_band():
    from trainer.families.modernbert import sizes as modernbert
    from trainer.families.modernbert.record import FAMILY

    assert shapes.SIZES["modernbert"] == modernbert.SIZES
    assert shapes.MASK_RATE["modernbert"] == FAMILY.pretraining_recipe["mlm_probability"]
    # Wqkv 3h² + Wo h² + GeGLU Wi h x 2i + Wo i x h, no biases; the head's h x h
    dense = 22 * (4 * 768**2 + 3 * 768 * 1152) + 768**2
    assert shapes.dense_weights("modernbert", "base") == dense
    # 8 global layers (0, 3, ..., 21) see 1024 keys; 14 local ones ±64 (129 inside the
    # row, fewer within 64 of its ends: 129 - 4160 / 1024 on average)
    keys = 8 * 1024 + 14 * (129 - 4160 / 1024)
    expected = 6 * dense + 6 * 768 * 50368 * 0.3 + 12 * 768 * keys
    assert shapes.flops_per_token("modernbert", "base", 1024, 50368) == pytest.approx(expected)
    # the band against the mask the model applies, where it is shorter than the row and not
    band = np.abs(np.arange(300)[:, None] - np.arange(300)[None]) <= 64
    assert shapes.keys_per_query(300, 128) == pytest.approx(band.sum() / 300)
    assert shapes.keys_per_query(50, 128) == 50


def test_packed_rows_hold_several_documents_each_opened_by_cls():
    ids = synthetic.packed_rows(np.random.default_rng(0), 16, 512, 1000, mean_document=128)
    starts = (ids == synthetic.CLS).sum(axis=1)
    assert ids.shape == (16, 512) and starts.min() >= 2 and 3 <= starts.mean() <= 5
    # every [CLS] but a row's last document's closes the document before with [SEP]
    flat = ids.reshape(-1)
    opened = np.flatnonzero(flat == synthetic.CLS)[1:]
    assert (flat[opened - 1] == synthetic.SEP).all()
    assert ids[:, 1:].min() >= synthetic.CLS and ids.max() < 1000


def test_the_pytorch_modernbert_is_the_trainers_modernbert_in_transformers():
    from trainer.families.modernbert import convert
    from trainer.models import model

    for size in ("tiny", "base"):
        ours = convert.hf_config(model.backbone_config("modernbert", size, 8000, 1024))
        mine = theirs.hf_config("modernbert", size, 1024, 8000, 0.0).to_dict()
        fields = [k for k in ours.to_dict() if not k.endswith("token_id")]
        skipped = {"max_position_embeddings", "transformers_version", "architectures"}
        assert {k: mine.get(k) for k in fields if k not in skipped} == {
            k: v for k, v in ours.to_dict().items() if k in fields and k not in skipped
        }


def test_bad_configs_are_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as stopped:
        bench_accel.parse(["--family", "modernbert", "--configs", "base/512,huge/128"])
    assert stopped.value.code == 2
    assert "--configs 'huge/128': want SIZE/LENGTH" in capsys.readouterr().err


def test_every_carried_wheel_is_pinned_and_missing_from_the_gpu_image():
    pins = accel_wheels.pins()
    assert set(pins) == {accel_wheels.normal(n) for n in accel_wheels.CARRIED}
    # Carried although the image has it: only for another version (2.x for our code).
    assert set(pins) & accel_wheels.IMAGE == {"huggingface-hub"}
    assert pins["keras"] == "3.15.1" and pins["grain"] == "0.2.18"


def test_the_documented_device_command_is_the_one_the_script_gives():
    text = gpu_image.no_tensorflow.ROOT + "/docs/benchmarks.md"
    with open(text) as f:
        doc = f.read()
    assert accel_wheels.command() in doc and accel_wheels.command("modernbert") in doc
