"""Warmup/decay schedule, weight decay exclusions and clipping."""

import keras
import numpy as np
import pytest

from trainer.optimization import WarmupLinearDecay, build_optimizer


def test_schedule_warms_up_then_decays_linearly_to_zero():
    schedule = WarmupLinearDecay(1e-3, total_steps=110, warmup_steps=10)
    values = [float(schedule(s)) for s in (0, 5, 10, 60, 110, 200)]
    np.testing.assert_allclose(values, [0.0, 5e-4, 1e-3, 5e-4, 0.0, 0.0], atol=1e-9)
    assert WarmupLinearDecay(**schedule.get_config()).get_config() == schedule.get_config()


def test_no_weight_decay_on_biases_and_layer_norm():
    dense, norm = keras.layers.Dense(3), keras.layers.LayerNormalization()
    dense.build((None, 3))
    norm.build((None, 3))
    variables = [dense.kernel, dense.bias, norm.gamma, norm.beta]
    for v in variables:
        v.assign(np.ones(v.shape, "float32"))
    optimizer = build_optimizer(0.1, total_steps=10, warmup_steps=0, weight_decay=0.5)
    optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in variables])
    kernel, bias, gamma, beta = (keras.ops.convert_to_numpy(v) for v in variables)
    np.testing.assert_allclose(kernel, 1 - 0.1 * 0.5)  # decoupled decay: lr * wd * w
    for value in (bias, gamma, beta):
        np.testing.assert_allclose(value, 1.0)


def test_gradients_are_clipped_by_global_norm():
    optimizer = build_optimizer(1e-3, total_steps=10, warmup_steps=1, clip_norm=1.0)
    assert optimizer.global_clipnorm == pytest.approx(1.0)
    assert build_optimizer(1e-3, 10, 1, clip_norm=0).global_clipnorm is None


def test_the_schedule_counts_updates_when_keras_counts_micro_batches():
    """Keras calls the schedule with its micro-batch count under gradient accumulation."""
    plain = WarmupLinearDecay(1e-3, total_steps=110, warmup_steps=10)
    accumulated = WarmupLinearDecay(1e-3, total_steps=110, warmup_steps=10, micro_batches=4)
    for update in (0, 3, 10, 57, 110):
        for micro in range(4):
            assert float(accumulated(4 * update + micro)) == float(plain(update))
    assert WarmupLinearDecay(**accumulated.get_config()).get_config() == accumulated.get_config()
    optimizer = build_optimizer(1e-3, 110, 10, grad_accum_steps=4)
    assert optimizer.gradient_accumulation_steps == 4
    assert build_optimizer(1e-3, 110, 10).gradient_accumulation_steps is None
