"""The accelerator benchmark's CPU mode, run as on the GPU machine (only its image's packages
and the carried wheels importable, TensorFlow among what is missing), its PyTorch side, and
the list of carried wheels (benchmarks/accel_wheels.py)."""

import os
import subprocess
import sys

import pytest

from benchmarks import accel_wheels, bench_accel
from tests.support import gpu_image

jax_pass = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") != "jax",
    reason="the JAX pass runs it (the benchmark trains on JAX)",
)


@jax_pass
def test_cpu_mode_trains_our_trainer_with_only_the_gpu_machines_packages(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_accel",
            "--cpu",
            "--configs",
            "tiny/64",
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
        ],
        env=gpu_image.env(),
        cwd=gpu_image.no_tensorflow.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    row = next(line for line in result.stdout.splitlines() if line.startswith("tiny"))
    tokens, gflops, mfu = row.split("|")[1].split()
    assert float(tokens.replace(",", "")) > 0 and 0 < float(gflops)
    assert 0 < float(mfu.rstrip("%")) < 100  # against the CPU's measured float32 peak
    assert "float32 matrix-product peak JAX" in result.stdout


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
    result = bench_accel.train_torch(args, "tiny", 32, "cpu", fused=True)
    assert result["batch"] == 2 and result["examples_per_second"] > 0


def test_the_benchmark_counts_flops_of_the_trainers_sizes():
    from trainer.families.sizes import SIZES

    assert bench_accel.SIZES == SIZES
    # RoBERTa-base at 128: 6 x 85 M dense weights dominate; the head at 15 % and attention
    # add 6.8 % and 2.8 %.
    per_token = bench_accel.flops_per_token("base", 128, 50265)
    assert 5.5e8 < per_token < 5.7e8
    assert bench_accel.dense_weights("base") == 12 * (4 * 768**2 + 2 * 768 * 3072) + 768**2


def test_every_carried_wheel_is_pinned_and_missing_from_the_gpu_image():
    pins = accel_wheels.pins()
    assert set(pins) == {accel_wheels.normal(n) for n in accel_wheels.CARRIED}
    # Carried although the image has it: only for another version (2.x for our code).
    assert set(pins) & accel_wheels.IMAGE == {"huggingface-hub"}
    assert pins["keras"] == "3.15.1" and pins["grain"] == "0.2.18"


def test_the_documented_device_command_is_the_one_the_script_gives():
    text = gpu_image.no_tensorflow.ROOT + "/docs/benchmarks.md"
    with open(text) as f:
        assert accel_wheels.command() in f.read()
