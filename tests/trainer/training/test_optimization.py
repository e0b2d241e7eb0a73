"""Warmup/decay schedule, weight decay exclusions and clipping (also over replicas)."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from trainer.training.optimizer import AdamWSettings, WarmupLinearDecay, build_optimizer


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
    optimizer = build_optimizer(
        0.1, total_steps=10, warmup_steps=0, adamw=AdamWSettings(weight_decay=0.5)
    )
    optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in variables])
    kernel, bias, gamma, beta = (keras.ops.convert_to_numpy(v) for v in variables)
    np.testing.assert_allclose(kernel, 1 - 0.1 * 0.5)  # decoupled decay: lr * wd * w
    for value in (bias, gamma, beta):
        np.testing.assert_allclose(value, 1.0)


def test_gradients_are_clipped_by_global_norm():
    optimizer = build_optimizer(
        1e-3, total_steps=10, warmup_steps=1, adamw=AdamWSettings(clip_norm=1.0)
    )
    assert optimizer.global_clipnorm == pytest.approx(1.0)
    assert build_optimizer(1e-3, 10, 1, AdamWSettings(clip_norm=0)).global_clipnorm is None


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


JAX = os.environ.get("KERAS_BACKEND") == "jax"


@pytest.fixture(scope="module")
def tensorflow_updates() -> dict:
    """One update on one device and on two MirroredStrategy replicas per clip norm, in a
    fresh process (collectives of earlier MirroredStrategy runs in this worker would clash)."""
    run = subprocess.run(
        [sys.executable, "-m", "tests.trainer.replica_clip_run", "1.0", "0.0"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _assert_same_update(one: dict, two: dict) -> None:
    assert (one["replicas"], two["replicas"]) == (1, 2) and one["updates"] == two["updates"] == 1
    for mine, theirs in zip(two["momentums"] + two["weights"], one["momentums"] + one["weights"]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(JAX, reason="TensorFlow's optimizer runs per replica; JAX: the next test")
@pytest.mark.slow  # a fresh TensorFlow process: ~5-10 s
@pytest.mark.parametrize("clip", ["1.0", "0.0"], ids=["clip_on", "clip_off"])
def test_two_tensorflow_replicas_clip_and_apply_the_one_device_gradient(tensorflow_updates, clip):
    """Keras clips each replica's share of the gradient before summing the shares; the
    trainer's AdamW clips their sum. Before the fix (clip 1.0): applied gradient norm 0.346
    on two replicas vs 1.0006 on one, weights 0.2 apart after one update; the one device's
    1.0006 (not 1) was Keras' norm of the embedding's IndexedSlices gradient, whose repeated
    rows it counts one by one. Clip off: the sum is taken once, not twice (the applied norm,
    ~58, would double)."""
    one, two = tensorflow_updates[clip]["one"], tensorflow_updates[clip]["two"]
    assert two["applied_norm"] == pytest.approx(one["applied_norm"], rel=1e-5)
    _assert_same_update(one, two)
    if float(clip):
        assert one["applied_norm"] == pytest.approx(1.0, rel=1e-5)  # active, and exact
    else:
        assert one["applied_norm"] > 10


@pytest.mark.slow  # two fits compiled by JAX: ~3-6 s
@pytest.mark.skipif(not JAX, reason="DataParallel of the JAX backend")
def test_jax_data_parallel_clips_the_global_gradient_already():
    """On JAX the step computes the gradient of the global (sharded) batch, so Keras' own
    clip is global: two devices apply the one-device update."""
    import jax

    from tests.trainer.replica_clip_run import update

    one = update(1.0)
    distribution = keras.distribution.DataParallel(devices=jax.devices("cpu")[:2])
    try:
        two = update(1.0, distribution.scope)
    finally:
        keras.distribution.set_distribution(None)
    assert one["applied_norm"] == pytest.approx(1.0, rel=1e-5)
    _assert_same_update(one, two)


def test_weights_saved_with_keras_adamw_load_into_the_trainers_optimizer(tmp_path):
    """Backups written before the trainer's AdamW (stock `keras.optimizers.AdamW`) resume:
    a `.weights.h5` keeps the optimizer's variables by position, not by class."""

    def compiled(optimizer):
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.compile(optimizer=optimizer, loss="mse")
        optimizer.build(model.trainable_variables)
        return model

    ours = build_optimizer(1e-3, 10, 0)
    old = compiled(keras.optimizers.AdamW.from_config(ours.get_config()))  # the old class
    old.fit(np.ones((4, 3), "float32"), np.ones((4, 2), "float32"), epochs=2, verbose=0)
    old.save_weights(tmp_path / "state.weights.h5")
    new = compiled(ours)
    new.load_weights(tmp_path / "state.weights.h5")
    assert int(keras.ops.convert_to_numpy(new.optimizer.iterations)) == 2
    for mine, theirs in zip(new.optimizer.variables, old.optimizer.variables, strict=True):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(mine), keras.ops.convert_to_numpy(theirs)
        )
