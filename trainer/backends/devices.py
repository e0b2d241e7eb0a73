"""What runs on the devices, decided once from the devices found: precision, XLA, steps per
call and fused attention (docs/training.md "Accelerator defaults"). Pretraining and fine-tuning
take the same rule; each backend's `setup` calls `device_settings` with what it found.

Example:
    >>> device_settings(None, "auto", None, on_tpu=True, on_cpu_replicas=False)
    DeviceSettings(precision='bf16', jit=True, steps_per_execution=100, fused_attention=True)
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DeviceSettings:
    precision: str  # "bf16" (mixed_bfloat16) or "fp32"
    jit: bool  # compile the whole train step (XLA on TensorFlow; JAX always jits)
    steps_per_execution: int
    # Attention probabilities without dropout, so that Keras' MultiHeadAttention calls
    # `ops.dot_product_attention` (trainer/models/model.py fuse_attention).
    fused_attention: bool = False


def device_settings(
    precision: str | None,
    jit_compile: str,
    steps_per_execution: int | None,
    on_tpu: bool,
    on_cpu_replicas: bool,
    cpu_without_xla: bool = False,
    on_gpu: bool = False,
    fused_attention: str = "auto",
) -> DeviceSettings:
    """What runs where, each `None`/"auto" decided by the device (docs/training.md
    "Accelerator defaults"):

    - bf16 on GPU and TPU: a GPU's tensor cores multiply bf16 at twice their float32 (TF32)
      rate (H100: 989 vs 495 dense TFLOP/s), a TPU's MXU multiplies in bf16 anyway, and
      activations take half the memory; fp32 on a CPU, where bf16 measured slower
      (docs/benchmarks.md).
    - 100 steps per call on GPU and TPU: the host waits for the device (the loss read of
      the NaN check, the logs) once per call, not after every step; 1 on a CPU, which is
      the host itself.
    - fused attention on GPU and TPU: no dropout on the attention probabilities, because
      Keras' attention with dropout materialises the (batch, heads, length, length) scores
      and never reaches `ops.dot_product_attention` (cuDNN's fused kernel on a GPU).
    - XLA for the step, except under MirroredStrategy over CPU devices, where Keras' jit
      step fails (keras#19005), and on a CPU whose TensorFlow has no XLA CPU backend (the
      TPU build, tested on CPUs). The masks do not depend on it (trainer/data/masking.py is exact
      with and without XLA)."""
    accelerator = on_tpu or on_gpu
    jit = {"true": True, "false": False, "auto": not (on_cpu_replicas or cpu_without_xla)}[
        jit_compile
    ]
    fused = {"true": True, "false": False, "auto": accelerator}[fused_attention]
    return DeviceSettings(
        precision or ("bf16" if accelerator else "fp32"),
        jit,
        steps_per_execution or (100 if accelerator else 1),
        fused,
    )


@dataclasses.dataclass(frozen=True)
class DeviceRequest:
    """What a command asks of the devices: its device flags (trainer/startup/device_flags.py)
    and pretraining's two step flags; the one input of `trainer.backends.setup`."""

    strategy: str = "auto"
    tpu: str | None = None
    tpu_zone: str | None = None
    gcp_project: str | None = None
    no_tpu: bool = False
    cpu_replicas: int = 1
    precision: str | None = None
    fused_attention: str = "auto"
    jit_compile: str = "auto"  # fine-tuning leaves both to the device rule
    steps_per_execution: int | None = None

    @classmethod
    def of(cls, flags, jit_compile: str = "auto", steps_per_execution: int | None = None):
        """From a command's parsed flags (a `DeviceFlags`), with the step flags given."""
        steps = {"jit_compile": jit_compile, "steps_per_execution": steps_per_execution}
        names = [f.name for f in dataclasses.fields(cls) if f.name not in steps]
        return cls(**{name: getattr(flags, name) for name in names}, **steps)
