"""The devices' rule: precision, XLA, steps per call and fused attention by device."""

from trainer.backends.devices import DeviceSettings, device_settings


def test_device_settings():
    assert device_settings(
        None, "auto", None, on_tpu=True, on_cpu_replicas=False
    ) == DeviceSettings("bf16", True, 100, fused_attention=True)
    # MirroredStrategy over CPUs: the step is not compiled (keras#19005); masks are the same.
    assert device_settings(None, "auto", None, False, on_cpu_replicas=True) == DeviceSettings(
        "fp32", False, 1
    )
    # The TPU build of TensorFlow on a CPU has no XLA backend for it: nothing is compiled.
    assert device_settings(
        None, "auto", None, False, False, cpu_without_xla=True
    ) == DeviceSettings("fp32", False, 1)
    assert device_settings("bf16", "false", 8, False, False).steps_per_execution == 8


def test_a_gpu_gets_bf16_many_steps_per_call_and_fused_attention_by_default():
    assert device_settings(None, "auto", None, False, False, on_gpu=True) == DeviceSettings(
        "bf16", True, 100, fused_attention=True
    )
    # A CPU keeps float32, one step per call and the backbone's attention dropout.
    assert device_settings(None, "auto", None, False, False) == DeviceSettings(
        "fp32", True, 1, fused_attention=False
    )
    # Each default gives way to its flag.
    assert device_settings(
        "fp32", "auto", 4, False, False, on_gpu=True, fused_attention="false"
    ) == DeviceSettings("fp32", True, 4, False)
    assert device_settings(None, "auto", None, False, False, fused_attention="true").fused_attention
