"""The devices' rule: precision, XLA, steps per call and fused attention by device."""

import dataclasses

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


def test_a_device_request_takes_the_device_flags_and_the_step_flags_given():
    from trainer.backends.devices import DeviceRequest
    from trainer.startup.device_flags import DeviceFlags

    flags = DeviceFlags(strategy="cpu", cpu_replicas=2, precision="fp32")
    request = DeviceRequest.of(flags)
    assert (request.strategy, request.cpu_replicas, request.precision) == ("cpu", 2, "fp32")
    assert (request.jit_compile, request.steps_per_execution) == ("auto", None)
    assert DeviceRequest.of(flags, "false", 4).steps_per_execution == 4
    # Every device flag reaches the request (a new flag needs its field here).
    assert {f.name for f in dataclasses.fields(DeviceFlags)} <= {
        f.name for f in dataclasses.fields(DeviceRequest)
    }
