"""Fine-tuning takes pretraining's accelerator defaults (`trainer/pretraining/plan.py
device_settings`, the flags of `trainer/startup/device_flags.py`): bf16 mixed precision and fused
attention on GPU and TPU, float32 and keras-hub's attention on a CPU, with the classifier's head
and loss in float32 under bf16. A GPU is pretended by handing `device_settings` `on_gpu=True`: the
rest of the run is the CPU's, so the decision, not the hardware, is what is tested."""

import inspect
import json

import keras
import numpy as np
import pytest

from common import flags
from tests.trainer import finetune_data as fd
from trainer.backends import devices
from trainer.finetuning import finetune
from trainer.finetuning.classifier import PretrainedBackbone, compile_for
from trainer.models import model_source
from trainer.pretraining import config as train_config
from trainer.startup import device_flags


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return fd.export_preset(tmp_path_factory.mktemp("models"), "roberta")


@pytest.fixture(autouse=True)
def float32_afterwards():
    yield  # a failed run must not leave mixed precision to later tests
    keras.mixed_precision.set_dtype_policy("float32")


def _finetune(export, folder, *extra) -> dict:
    folder.mkdir()
    train = fd.write(folder / "train.csv", fd.examples(24, 0, False, False))
    dev = fd.write(folder / "dev.csv", fd.examples(8, 1, False, False))
    args = [
        *("--epochs", "1" if keras.backend.backend() == "jax" else "2"),  # JAX: compiles
        *("--model", export, "--train", train, "--dev", dev, "--text_column", "sentence"),
        *("--output_dir", str(folder / "out"), "--learning_rate", "1e-3", "--batch_size", "8"),
        *("--seeds", "1", "--strategy", "cpu", *extra),
    ]
    assert finetune.main(args) == 0
    return json.loads((folder / "out" / "results.json").read_text())


def _losses(document) -> list[float]:
    return [e["train_loss"] for e in document["scores"]["seeds"][0]["epochs"]]


def test_one_precision_and_attention_flag_for_pretraining_and_fine_tuning():
    fields = {f.name: f for f in device_flags.DeviceFlags.__dataclass_fields__.values()}
    for name in ("precision", "fused_attention"):  # pretraining holds DeviceFlags as its part
        assert finetune.FinetuneFlags.__dataclass_fields__[name] is fields[name]
        device_part = train_config.TrainConfig.__dataclass_fields__["device"]
        assert device_part.metadata["group"] is device_flags.DeviceFlags


def test_bf16_fine_tunes_near_fp32_and_a_cpu_stays_fp32_by_default(export, tmp_path):
    fp32 = _finetune(export, tmp_path / "fp32")
    bf16 = _finetune(export, tmp_path / "bf16", "--precision", "bf16")
    assert fp32["protocol"]["precision"] == "fp32" and not fp32["protocol"]["fused_attention"]
    assert bf16["protocol"]["precision"] == "bf16"
    assert all(np.isfinite(_losses(bf16)))
    print(f"train loss: fp32 {_losses(fp32)}, bf16 {_losses(bf16)}")
    # bf16 keeps 8 bits of mantissa: the same run, a little apart (measured 3e-5 relative:
    # the tiny model's loss sits near ln 2), but apart: the backbone did run in bf16.
    assert _losses(bf16) != _losses(fp32)
    assert _losses(bf16) == pytest.approx(_losses(fp32), rel=3e-2)


@pytest.fixture
def on_a_gpu(monkeypatch):
    """`device_settings` told that the devices are a GPU (each backend passes `on_gpu`)."""
    original = devices.device_settings
    signature = inspect.signature(original)

    def pretended(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.arguments["on_gpu"] = True
        return original(*bound.args, **bound.kwargs)

    monkeypatch.setattr(devices, "device_settings", pretended)


def _flags(*extra):
    args = ["--model", "m", "--train", "t.csv", "--dev", "d.csv", "--output_dir", "o"]
    return flags.parse(flags.ArgumentParser(), finetune.FinetuneFlags, [*args, *extra])


def test_on_an_accelerator_fine_tuning_defaults_to_bf16_and_fused_attention(on_a_gpu):
    device = finetune.devices(_flags(), []).device
    assert (device.precision, device.fused_attention) == ("bf16", True)
    forced = finetune.devices(_flags("--precision", "fp32", "--fused_attention", "false"), [])
    assert (forced.device.precision, forced.device.fused_attention) == ("fp32", False)


def test_on_a_cpu_fine_tuning_defaults_to_fp32_without_fused_attention():
    device = finetune.devices(_flags(), []).device
    assert (device.precision, device.fused_attention) == ("fp32", False)


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="one end-to-end pass is enough")
def test_a_fine_tune_with_the_accelerator_defaults_records_them(export, tmp_path, on_a_gpu):
    document = _finetune(export, tmp_path / "gpu", "--epochs", "1", "--jit_compile", "false")
    assert document["protocol"]["precision"] == "bf16"
    assert document["protocol"]["fused_attention"] is True
    assert all(np.isfinite(_losses(document)))


def test_under_bf16_the_classifier_head_and_loss_compute_in_float32(export):
    backbone = PretrainedBackbone(model_source.resolve(export))
    model = backbone.classifier(3, seed=1, precision="bf16", fused_attention=True)
    ids = np.full((2, 8), 5, "int32")
    features = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    assert keras.backend.standardize_dtype(model.backbone(features).dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(model(features).dtype) == "float32"
    dense = [layer for layer in model.backbone._flatten_layers() if "Dense" in type(layer).__name__]
    assert dense and {layer.compute_dtype for layer in dense} == {"bfloat16"}
    attention = [
        layer
        for layer in model._flatten_layers()
        if isinstance(layer, keras.layers.MultiHeadAttention)
    ]
    assert attention and {layer._dropout for layer in attention} == {0.0}
    compile_for(model, "classification", 1e-3, 10, 1, 0.01, jit_compile=False)
    loss = model.loss(np.array([0, 2]), model(features))
    assert keras.backend.standardize_dtype(loss.dtype) == "float32"
