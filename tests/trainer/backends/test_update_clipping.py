"""StableAdamW's per-tensor update clipping (trainer/backends/update_clipping.py) against a NumPy
reference: explicit gradients, then compiled `fit` steps with and without accumulation."""

import keras
import numpy as np
import pytest

from trainer.training.optimizer import AdamWSettings, build_optimizer

B1, B2, EPS, WD = 0.9, 0.98, 1e-6, 0.1


def reference(params: dict, grads_per_update: list[dict], rates: list[float], clip: bool):
    """AdamW as Keras computes it (epsilon added to sqrt(v), bias corrections folded into
    the rate), each tensor's rate divided by max(1, RMS_t) when `clip`. Weight decay on the
    `kernel` only. Returns the parameters and every update's clip factors."""
    params = {k: v.astype(np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(v) for k, v in params.items()}
    factors = []
    for t, (grads, lr) in enumerate(zip(grads_per_update, rates), start=1):
        step = {}
        for name, g in grads.items():
            g = g.astype(np.float64)
            m[name] += (g - m[name]) * (1 - B1)
            v[name] += (g * g - v[name]) * (1 - B2)
            v_hat = v[name] / (1 - B2**t)
            rms = np.sqrt(np.mean(g * g / np.maximum(v_hat, EPS**2)))
            step[name] = 1 / max(1.0, rms) if clip else 1.0
            rate = lr * step[name]
            if name == "kernel":
                params[name] -= params[name] * WD * rate
            alpha = rate * np.sqrt(1 - B2**t) / (1 - B1**t)
            params[name] -= m[name] * alpha / (np.sqrt(v[name]) + EPS)
        factors.append(step)
    return params, factors


def _dense(params):
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    layer.kernel.assign(params["kernel"])
    layer.bias.assign(params["bias"])
    return layer


def _optimizer(clip: bool, accumulation: int = 1):
    # warmup 0 over a long run: the rates of the first updates are known exactly
    optimizer = build_optimizer(
        1e-2,
        10_000,
        0,
        AdamWSettings(WD, B1, B2, EPS, clip_norm=0, update_clipping=clip),
        grad_accum_steps=accumulation,
    )
    return optimizer


def _rates(updates: int):
    return [1e-2 * (1 - s / 10_000) for s in range(updates)]


def _gradients(updates: int, seed: int = 0) -> list[dict]:
    """Random gradients with a spike (x30) at update 4 in the kernel: that update clips."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(updates):
        kernel = rng.normal(size=(3, 2)).astype("float32") * (30 if t == 3 else 1)
        out.append({"kernel": kernel, "bias": rng.normal(size=(2,)).astype("float32")})
    return out


START = {
    "kernel": np.arange(6, dtype="float32").reshape(3, 2) / 10 - 0.2,
    "bias": np.array([0.3, -0.1], "float32"),
}


@pytest.mark.parametrize("updates", [1, 6])
@pytest.mark.parametrize("clip", [True, False], ids=["clipped", "plain"])
def test_updates_match_the_numpy_reference(updates, clip):
    layer = _dense(START)
    optimizer = _optimizer(clip)
    for grads in _gradients(updates):
        optimizer.apply_gradients([(grads["kernel"], layer.kernel), (grads["bias"], layer.bias)])
    expected, factors = reference(START, _gradients(updates), _rates(updates), clip)
    for name in ("kernel", "bias"):
        got = keras.ops.convert_to_numpy(getattr(layer, name))
        np.testing.assert_allclose(got, expected[name], atol=1e-6, rtol=0)
    if clip and updates > 3:  # the spike was clipped: the test would see an unclipped step
        assert factors[3]["kernel"] < 0.6 and factors[0]["kernel"] == 1.0


def test_off_is_keras_adamw_exactly():
    ours, theirs = _dense(START), _dense(START)
    mine = _optimizer(False)
    stock = keras.optimizers.AdamW.from_config(mine.get_config())
    stock.exclude_from_weight_decay(var_names=["bias"])
    for grads in _gradients(6):
        for layer, optimizer in ((ours, mine), (theirs, stock)):
            optimizer.apply_gradients(
                [(grads["kernel"], layer.kernel), (grads["bias"], layer.bias)]
            )
    for name in ("kernel", "bias"):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(getattr(ours, name)),
            keras.ops.convert_to_numpy(getattr(theirs, name)),
        )
    assert "update_clipping" not in mine.get_config()
    assert _optimizer(True).get_config()["update_clipping"] is True


def _batches(updates: int):
    """Each update's 4 rows; the targets of update 4 are 30 times larger (a spike)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(updates, 4, 3)).astype("float32")
    y = rng.normal(size=(updates, 4, 2)).astype("float32")
    y[3] *= 30
    return x, y


def _mse_gradients(params, x, y) -> dict:
    """Gradients of Keras' mean squared error of x @ kernel + bias (mean over all entries)."""
    residual = x.astype(np.float64) @ params["kernel"] + params["bias"] - y
    scale = 2 / residual.size
    return {"kernel": scale * x.T @ residual, "bias": scale * residual.sum(axis=0)}


@pytest.mark.parametrize("accumulation", [1, 2])
def test_compiled_fit_steps_match_the_reference_also_under_accumulation(accumulation):
    """Five updates of `fit` (XLA-compiled) on a linear model: each update's gradient is
    that of its 4 rows (accumulated: the mean of two micro-batches of 2, which for a mean
    squared error over equal halves is the same gradient)."""
    model = keras.Sequential([keras.Input((3,)), _dense(START)])
    model.compile(optimizer=_optimizer(True, accumulation), loss="mse", jit_compile=True)
    updates = 5
    x, y = _batches(updates)
    model.fit(
        x.reshape(-1, 3),
        y.reshape(-1, 2),
        batch_size=4 // accumulation,
        epochs=1,
        shuffle=False,
        verbose=0,
    )
    params, grads, factors = dict(START), [], []
    for t in range(updates):  # the reference's gradients follow its own parameters
        grads.append(_mse_gradients(params, x[t], y[t]))
        params, factors = reference(START, grads, _rates(t + 1), clip=True)
    assert factors[3]["kernel"] < 0.6  # the spike was clipped
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in model.layers[0].weights)
    np.testing.assert_allclose(kernel, params["kernel"], atol=1e-6, rtol=0)
    np.testing.assert_allclose(bias, params["bias"], atol=1e-6, rtol=0)
