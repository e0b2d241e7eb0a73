"""One optimizer update of a tiny Keras model by `fit`, on one device and on two replicas
(TensorFlow: MirroredStrategy over two logical CPUs; JAX: DataParallel over two CPU devices),
with the trainer's optimizer (`trainer.training.optimizer.build_optimizer`).

What the update applied is read from Adam's first moment: after the first update it is
(1 - beta_1) x the gradient the optimizer applied, after clipping, whatever the learning rate.

TensorFlow runs it in a fresh process (`python -m tests.trainer.replica_clip_run CLIP...`
prints one JSON line, {clip: {"one": ..., "two": ...}}): the collectives of earlier
MirroredStrategy runs in one test worker clash with a new one's. JAX calls `update` in the
test's own process.
"""

from __future__ import annotations

import json
import sys

import keras
import numpy as np

from trainer import backends
from trainer.training.optimizer import AdamWSettings, build_optimizer

TOKENS, VOCAB, WIDTH, PER_BATCH = 6, 10, 4, 8  # the global batch; two replicas get 4 rows each


def batch():
    """A global batch whose two halves pull hard in different directions, so each
    replica's half of the gradient has its own norm (far above 1). Tokens repeat within
    rows and across them: TensorFlow's embedding gradient is then an IndexedSlices with
    repeated rows."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, VOCAB // 2, size=(PER_BATCH, TOKENS)).astype("int32")
    y = np.where(np.arange(PER_BATCH)[:, None] < PER_BATCH // 2, 100.0, -3.0)
    return x, np.concatenate([y, -0.5 * y], axis=1).astype("float32")


def _model():
    model = keras.Sequential(
        [
            keras.Input((TOKENS,), dtype="int32"),
            keras.layers.Embedding(VOCAB, WIDTH),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(2),
        ]
    )
    table = np.random.default_rng(1).normal(size=(VOCAB, WIDTH)).astype("float32")
    model.set_weights([table, np.full((WIDTH, 2), 0.1, "float32"), np.zeros(2, "float32")])
    return model


def update(clip: float, scope=None) -> dict:
    """Weights and first moments after one update on `batch()`, under `scope` (a
    strategy's or a distribution's) when given."""
    import contextlib

    with scope() if scope else contextlib.nullcontext():
        model = _model()
        optimizer = build_optimizer(0.1, 10, 0, AdamWSettings(clip_norm=clip))
        model.compile(optimizer=optimizer, loss="mse", jit_compile=False)
        x, y = batch()
        model.fit(x, y, batch_size=PER_BATCH, epochs=1, shuffle=False, verbose=0)
    moments = [v for v in optimizer.variables if "momentum" in v.path]
    return {
        "replicas": backends.model_replicas(model),
        "updates": int(keras.ops.convert_to_numpy(optimizer.iterations)),
        "weights": [w.tolist() for w in model.get_weights()],
        "momentums": [keras.ops.convert_to_numpy(m).tolist() for m in moments],
        "applied_norm": float(
            np.sqrt(sum(np.sum(keras.ops.convert_to_numpy(m) ** 2) for m in moments)) / 0.1
        ),
    }


def main(argv) -> None:
    """TensorFlow: the one-device and the two-replica update per clip norm, one JSON line."""
    import tensorflow as tf

    from trainer.backends import tensorflow_strategy

    tensorflow_strategy.split_cpu(2)
    two_replicas = tensorflow_strategy.cpu_replicas(2)
    assert isinstance(two_replicas, tf.distribute.MirroredStrategy)
    found = {}
    for clip in argv:
        found[clip] = {"one": update(float(clip)), "two": update(float(clip), two_replicas.scope)}
    print(json.dumps(found))


if __name__ == "__main__":
    main(sys.argv[1:])
