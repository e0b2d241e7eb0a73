"""The TensorFlow backend: a `tf.distribute` strategy (TPUStrategy, MirroredStrategy over GPUs
or logical CPUs, or the default one) and `distribute_datasets_from_function`."""

from __future__ import annotations

import functools

import tensorflow as tf

from trainer.backends import devices as device_rules
from trainer.backends import tensorflow_strategy as strategies
from trainer.backends.runtime import Runtime
from trainer.data.splits import PipelineShare


def _share(context: tf.distribute.InputContext) -> PipelineShare:
    return PipelineShare(
        context.input_pipeline_id,
        context.num_input_pipelines,
        context.num_replicas_in_sync // context.num_input_pipelines,
    )


def _distribute(strategy, dataset_fn):
    """The dataset as `fit` wants it: distributed under a real strategy, plain otherwise."""
    distributed = (
        tf.distribute.TPUStrategy,
        tf.distribute.MirroredStrategy,
        tf.distribute.MultiWorkerMirroredStrategy,
    )
    if not isinstance(strategy, distributed):  # the default strategy (one device)
        return dataset_fn(PipelineShare())
    return strategy.distribute_datasets_from_function(lambda c: dataset_fn(_share(c)))


def model_replicas(model) -> int:
    """The replicas of the strategy the model was built under (Keras keeps it)."""
    return model.distribute_strategy.num_replicas_in_sync


def setup(config: device_rules.DeviceRequest) -> Runtime:
    strategy = strategies.select_strategy(
        config.strategy,
        config.tpu,
        config.tpu_zone,
        config.gcp_project,
        config.cpu_replicas,
        config.no_tpu,
    )
    on_tpu = strategies.is_tpu(strategy)
    on_cpu_replicas = strategies.runs_on_cpu_replicas(strategy)
    on_gpu = not (on_tpu or on_cpu_replicas) and bool(tf.config.list_logical_devices("GPU"))
    device = device_rules.device_settings(
        config.precision,
        config.jit_compile,
        config.steps_per_execution,
        on_tpu,
        on_cpu_replicas,
        strategies.cpu_without_xla(strategy),
        on_gpu,
        config.fused_attention,
    )
    replicas = strategy.num_replicas_in_sync
    pipelines = strategies.num_input_pipelines(strategy)
    # pipeline_id is per host and given to each dataset_fn by tf.distribute; this process
    # (the one TPU client, or one device) is pipeline 0.
    return Runtime(
        "tensorflow",
        replicas,
        pipelines,
        0,
        replicas // pipelines,
        1,
        strategies.is_chief(strategy),
        on_tpu,
        device,
        strategy.scope,
        functools.partial(_distribute, strategy),
    )
