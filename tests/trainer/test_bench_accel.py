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
from benchmarks.accel import ours, shapes, synthetic, table, theirs
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
    our_run, theirs_run = out["ours"]["runs"]["tiny/128"], out["torch"]["runs"]["tiny/128"]
    # the family's recipe on both sides; our layers took the path they record
    assert our_run["mask_rate"] == theirs_run["mask_rate"] == 0.3
    assert our_run["attention_paths"] == {"portable": 2}
    assert our_run["examples_per_second"] > 0 and theirs_run["examples_per_second"] > 0
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
                "--configs",
                "tiny/32",
            ]
        ),
        accelerator=False,
    )
    args.facts = json.dumps(ours.family_facts(args, accelerator=False))  # as the parent does
    result = theirs.train_torch(args, "tiny", 32, "cpu", fused=True)
    assert result["batch"] == 2 and result["examples_per_second"] > 0


@pytest.mark.parametrize("family", shapes.FAMILIES)
def test_the_family_facts_the_jax_child_prints_are_its_records(family):
    from trainer import families
    from trainer.families.sizes import SIZES
    from trainer.models import model

    record = families.get(family)
    assert tuple(record.sizes or SIZES) == shapes.SIZE_NAMES  # what the parent's --configs takes
    argv = ["--family", family, "--configs", "base/512,tiny/128"]
    args = bench_accel._defaults(bench_accel.parse(argv), accelerator=True)
    facts = json.loads(json.dumps(ours.family_facts(args, accelerator=True)))  # as printed
    # on an accelerator, the vocabulary of the family's published checkpoint
    assert facts["vocab"] == record.hub_vocabulary
    assert facts["mask_rate"] == record.recipe_value("mlm_probability")
    assert facts["packed"] == bool(record.packed_rows_only)
    config = model.backbone_config(record, "base", record.hub_vocabulary, 512)
    assert facts["configs"]["base/512"] == {
        **{k: config[k] for k in ours.SHAPE},
        "flops_per_token": record.flops_per_token(config, 512),
    }
    assert set(facts["configs"]) == {"base/512", "tiny/128"}


def test_modernbert_trains_its_recipe_on_packed_rows_and_retries_on_xla_attention():
    args = bench_accel._defaults(bench_accel.parse(["--family", "modernbert"]), True)
    facts = ours.family_facts(args, accelerator=True)
    assert (facts["vocab"], facts["mask_rate"], facts["packed"]) == (50368, 0.3, True)
    assert ours.unfused("modernbert") == (
        "--config",
        """--config '{"attention_path": "portable"}'""",
    )
    assert ours.unfused("roberta") == ("--fused_attention", "--fused_attention false")
    args = bench_accel._defaults(bench_accel.parse([]), True)
    facts = ours.family_facts(args, accelerator=True)
    assert (facts["vocab"], facts["mask_rate"], facts["packed"]) == (50265, 0.15, False)


def test_the_table_counts_flops_from_the_facts_our_side_printed():
    args = bench_accel._defaults(bench_accel.parse(["--configs", "tiny/128"]), False)
    facts = {
        "vocab": 8000,
        "mask_rate": 0.15,
        "packed": False,
        "configs": {"tiny/128": {"flops_per_token": 1e6}},
    }
    result = {
        "device": "CPU",
        "accelerator": False,
        "peak": 1e11,
        "attention": "n/a on a CPU",
        "facts": facts,
        "runs": {"tiny/128": {"examples_per_second": 10.0}},
    }
    lines = table.report(args, result, None)
    row = next(line for line in lines if line.startswith("tiny"))
    assert row.split("|")[1].split() == ["1,280", "1.28", "1.3%"]  # 1,280 tokens/s x 1e6
    assert "roberta: 15 % masking (its pretraining default) on both sides" in lines


def test_the_parent_and_the_pytorch_side_import_nothing_of_the_trainer():
    # the parent must not initialise a device, and neither has Keras on the GPU machine
    code = (
        "import sys; import benchmarks.bench_accel, benchmarks.accel.theirs, "
        "benchmarks.accel_wheels; "
        "print(sorted(m for m in ('trainer', 'keras', 'jax', 'torch') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"


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
    from trainer import families
    from trainer.families.modernbert import convert
    from trainer.models import model

    for size in ("tiny", "base"):
        backbone = model.backbone_config(families.get("modernbert"), size, 8000, 1024)
        trainers = convert.hf_config(backbone)
        mine = theirs.hf_config("modernbert", backbone, 1024, 8000, 0.0).to_dict()
        fields = [k for k in trainers.to_dict() if not k.endswith("token_id")]
        skipped = {"max_position_embeddings", "transformers_version", "architectures"}
        assert {k: mine.get(k) for k in fields if k not in skipped} == {
            k: v for k, v in trainers.to_dict().items() if k in fields and k not in skipped
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
