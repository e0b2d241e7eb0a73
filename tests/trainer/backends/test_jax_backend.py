"""The JAX backend's devices without accelerators: CPU devices as asked, one clear message for
a missing TPU/GPU (the multi-process path is in test_pod.py)."""

import keras
import pytest

from tests.trainer.mlm_data import task_args
from trainer.backends.devices import DeviceRequest
from trainer.backends.runtime import StrategyError
from trainer.pretraining.config import parse_args

pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX's devices")


def _config(*extra):
    return parse_args(
        task_args({"train": "t", "eval": "e", "tokenizer": "k"}, "o", "--train_steps", "1", *extra)
    )


@pytest.mark.parametrize("kind", ["tpu", "gpu"])
def test_a_missing_accelerator_is_one_clear_message(kind):
    from trainer.backends import jax_backend

    with pytest.raises(StrategyError) as err:
        jax_backend._devices(kind, 1)
    assert f"JAX sees no {kind.upper()}" in str(err.value) and "\n" not in str(err.value)


def test_cpu_devices_as_asked_and_too_many_is_one_line():
    from trainer.backends import jax_backend

    assert len(jax_backend._devices("cpu", 1)) == 1
    assert len(jax_backend._devices("cpu", 2)) == 2  # conftest: two host devices
    with pytest.raises(StrategyError, match="xla_force_host_platform_device_count=3"):
        jax_backend._devices("cpu", 3)


def test_one_process_is_the_chief_and_the_only_pipeline():
    from trainer.backends import jax_backend

    config = _config()
    execution = config.execution
    request = DeviceRequest.of(config.device, execution.jit_compile, execution.steps_per_execution)
    runtime = jax_backend.setup(request)
    assert (runtime.backend, runtime.replicas, runtime.num_pipelines) == ("jax", 1, 1)
    assert runtime.chief and runtime.device.jit and runtime.pipeline_batch_size(16) == 16
