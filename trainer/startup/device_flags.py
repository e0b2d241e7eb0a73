"""The flags that choose the devices and what runs on them (precision, fused attention), one
definition for every command that trains: pretraining (`trainer.pretraining.config.TrainConfig`,
its `device` part) and fine-tuning (`trainer.finetuning.finetune.FinetuneFlags`, which inherits
`DeviceFlags`) share it, and
`trainer.backends.setup` reads them.

Example:
    >>> DeviceFlags(strategy="cpu", cpu_replicas=2).check_devices()
"""

from __future__ import annotations

import dataclasses

from common.flags import flag


@dataclasses.dataclass(frozen=True)
class DeviceFlags:
    strategy: str = flag(
        "Where to train; `auto` picks TPU, then GPUs, then CPU.",
        "auto",
        choices=("auto", "tpu", "gpu", "cpu"),
    )
    tpu: str = flag(
        "TPU name; `local` on a TPU VM (the default for --strategy tpu).", aliases=["--tpu_name"]
    )
    tpu_zone: str = flag("Zone of a named TPU.")
    gcp_project: str = flag("Project of a named TPU.")
    no_tpu: bool = flag(
        "Legacy flag (HF example): never use a TPU (same as --strategy gpu/cpu).", False
    )
    cpu_replicas: int = flag(
        "With --strategy cpu: split the CPU into N devices and the global batch over them "
        "(TensorFlow: MirroredStrategy over N logical CPUs; JAX: DataParallel, which needs "
        "XLA_FLAGS=--xla_force_host_platform_device_count=N at startup). Exercises the "
        "multi-replica path.",
        1,
        minimum=1,
    )

    # What runs on the devices, decided by `trainer.backends.devices.device_settings` from the
    # devices found (docs/training.md "Accelerator defaults"): one rule for both commands.
    precision: str = flag(
        "bf16 = mixed_bfloat16 (the default on GPU and TPU), fp32 on a CPU.",
        None,
        choices=("bf16", "fp32"),
    )
    fused_attention: str = flag(
        "No dropout on the attention probabilities (the hidden states keep theirs), so that "
        "attention runs as one fused op (cuDNN's on a GPU): auto = on GPU and TPU.",
        "auto",
        choices=("auto", "true", "false"),
    )

    def check_devices(self) -> None:
        """Raises ValueError for flags that contradict each other."""
        if self.no_tpu and self.strategy == "tpu":
            raise ValueError("--no_tpu contradicts --strategy tpu")
