"""The contrastive loss against a numpy reference, and gradient caching against the whole
batch's gradient in one pass, on a tiny encoder (token embeddings, masked mean, dense, L2
normalised); the same file runs on both backends. The references differentiate with the
backend's own autodiff (jax.grad, tf.GradientTape), not trainer/backends/gradients.py."""

import functools

import keras
import numpy as np
import pytest
from keras import ops

from trainer.finetuning import contrastive

# Gradient caching sums the same products in another order: float32 rounding only. Each
# variable's gradient is compared to 1e-5 of its own scale (its largest magnitude, at least
# 1): at temperature 0.05 the entries reach about 100 to 225, and float32 keeps 7 digits of
# them. Measured on CPU: at most 5.1e-7 of the scale on TensorFlow, 2.3e-7 on JAX.
GRADIENT_TOLERANCE = 1e-5


def _unit(rng, rows, dims=8):
    vectors = rng.normal(size=(rows, dims))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def _reference(queries, documents, temperature, symmetric):
    """InfoNCE in float64 numpy, the log-softmax written out."""
    q, d = queries.astype(np.float64), documents.astype(np.float64)
    batch = len(q)
    scores = q @ d.T / temperature

    def cross_entropy(logits):  # the right class of row i is column i
        top = logits.max(axis=1, keepdims=True)
        log_sum = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
        return np.mean(log_sum - logits[np.arange(len(logits)), np.arange(len(logits))])

    forward = cross_entropy(scores)
    if not symmetric:
        return forward
    return (forward + cross_entropy(scores[:, :batch].T)) / 2


@pytest.mark.parametrize("negatives", [0, 1, 3])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("temperature", [contrastive.TEMPERATURE, 0.5])
def test_info_nce_equals_the_numpy_reference(negatives, symmetric, temperature):
    rng = np.random.default_rng(negatives)
    queries, documents = _unit(rng, 6), _unit(rng, 6 * (1 + negatives))
    got = contrastive.info_nce(queries, documents, temperature, symmetric=symmetric)
    assert abs(float(got) - _reference(queries, documents, temperature, symmetric)) < 1e-6


def test_the_order_of_the_hard_negatives_does_not_matter():
    rng = np.random.default_rng(0)
    queries, documents = _unit(rng, 4), _unit(rng, 12)
    shuffled = np.concatenate([documents[:4], documents[4:][rng.permutation(8)]])
    assert float(contrastive.info_nce(queries, documents)) == pytest.approx(
        float(contrastive.info_nce(queries, shuffled)), abs=1e-6
    )


def test_the_positive_is_the_documents_row_of_its_query():
    queries = np.eye(3, dtype=np.float32)
    right = contrastive.info_nce(queries, queries)  # each query's own vector is its positive
    wrong = contrastive.info_nce(queries, queries[[1, 2, 0]])
    assert float(right) < 1e-6 < float(wrong)


def test_documents_that_are_not_b_plus_bh_rows_are_refused():
    with pytest.raises(ValueError, match="5 document vectors for 2 queries"):
        contrastive.info_nce(np.ones((2, 4), "float32"), np.ones((5, 4), "float32"))


class MaskedMean(keras.layers.Layer):
    def call(self, sequence, mask):
        mask = ops.expand_dims(ops.cast(mask, sequence.dtype), -1)
        return ops.sum(sequence * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)


def _encoder(dropout=0.0, seed=3):
    keras.utils.set_random_seed(seed)
    token_ids = keras.Input((6,), dtype="int32", name="token_ids")
    padding_mask = keras.Input((6,), dtype="int32", name="padding_mask")
    hidden = keras.layers.Embedding(40, 16)(token_ids)
    hidden = keras.layers.Dense(16, activation="tanh")(hidden)
    pooled = MaskedMean()(hidden, padding_mask)
    if dropout:
        pooled = keras.layers.Dropout(dropout)(pooled)
    vectors = keras.layers.UnitNormalization()(keras.layers.Dense(8)(pooled))
    return keras.Model({"token_ids": token_ids, "padding_mask": padding_mask}, vectors)


def _inputs(rng, rows):
    lengths = rng.integers(1, 7, size=rows)
    return {
        "token_ids": rng.integers(1, 40, size=(rows, 6)).astype("int32"),
        "padding_mask": (np.arange(6)[None, :] < lengths[:, None]).astype("int32"),
    }


def _backend_gradient(fn, trainable):
    """(value, gradients) of the scalar `fn(trainable)`, by the backend's own autodiff."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.value_and_grad(fn)(list(trainable))
    import tensorflow as tf

    trainable = [tf.convert_to_tensor(value) for value in trainable]
    with tf.GradientTape() as tape:
        tape.watch(trainable)
        value = fn(trainable)
    return value, [tf.convert_to_tensor(g) for g in tape.gradient(value, trainable)]


def _whole_batch(model, queries, documents, loss):
    trainable, non_trainable = contrastive.current_values(model)

    def fn(values):
        q, _ = model.stateless_call(values, non_trainable, queries, training=True)
        d, _ = model.stateless_call(values, non_trainable, documents, training=True)
        return loss(q, d)

    return _backend_gradient(fn, trainable)


def _assert_gradients_equal(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        scale = max(1.0, float(np.abs(b).max()))
        assert float(np.abs(a - b).max()) <= GRADIENT_TOLERANCE * scale


@pytest.mark.parametrize(
    "negatives, symmetric, temperature", [(1, False, 0.05), (0, True, 0.05), (2, False, 0.5)]
)
def test_cached_gradient_equals_the_whole_batch_gradient(negatives, symmetric, temperature):
    model = _encoder()
    rng = np.random.default_rng(negatives)
    queries, documents = _inputs(rng, 8), _inputs(rng, 8 * (1 + negatives))
    loss = functools.partial(contrastive.info_nce, temperature=temperature, symmetric=symmetric)
    want_loss, want = _whole_batch(model, queries, documents, loss)
    values = contrastive.current_values(model)
    step = contrastive.cached_gradient(model, values, queries, documents, 2, loss=loss)
    assert float(step.loss) == pytest.approx(float(want_loss), abs=1e-6)
    _assert_gradients_equal(step.gradients, want)
    assert max(float(np.abs(np.asarray(g)).max()) for g in want) > 1e-3  # not all zero


def test_the_loss_gradient_on_a_tiny_model_is_finite_at_a_low_temperature():
    model = _encoder()
    rng = np.random.default_rng(1)
    queries, documents = _inputs(rng, 4), _inputs(rng, 8)
    loss = functools.partial(contrastive.info_nce, temperature=0.001, symmetric=True)
    value, grads = _whole_batch(model, queries, documents, loss)
    assert np.isfinite(float(value))
    assert all(np.isfinite(np.asarray(g)).all() for g in grads)


def test_the_second_pass_replays_the_first_passes_dropout_masks():
    model = _encoder(dropout=0.5)
    rng = np.random.default_rng(2)
    queries, documents = _inputs(rng, 8), _inputs(rng, 16)
    trainable, non_trainable = contrastive.current_values(model)
    vectors, starts, _ = contrastive.embed_chunks(model, (trainable, non_trainable), queries, 2)
    chunks = [{k: v[i : i + 2] for k, v in queries.items()} for i in range(0, 8, 2)]
    again = [
        model.stateless_call(trainable, s, c, training=True)[0] for s, c in zip(starts, chunks)
    ]
    np.testing.assert_array_equal(np.concatenate([np.asarray(a) for a in again]), vectors)
    # the seed moves on: the chunks were not all dropped the same way
    assert len({tuple(np.asarray(s[0]).tolist()) for s in starts}) == 4

    # the cached gradient is the gradient of the loss under those very masks
    step = contrastive.cached_gradient(model, (trainable, non_trainable), queries, documents, 2)
    doc_chunks = [{k: v[i : i + 2] for k, v in documents.items()} for i in range(0, 16, 2)]

    def fn(values):
        state, outputs = non_trainable, []
        for chunk in chunks + doc_chunks:
            output, state = model.stateless_call(values, state, chunk, training=True)
            outputs.append(output)
        return contrastive.info_nce(ops.concatenate(outputs[:4]), ops.concatenate(outputs[4:]))

    want_loss, want = _backend_gradient(fn, trainable)
    assert float(step.loss) == pytest.approx(float(want_loss), abs=1e-6)
    _assert_gradients_equal(step.gradients, want)


def test_cached_gradient_compiles_with_xla():
    model = _encoder()
    rng = np.random.default_rng(4)
    queries, documents = _inputs(rng, 8), _inputs(rng, 16)
    values = contrastive.current_values(model)
    eager = contrastive.cached_gradient(model, values, queries, documents, 4)

    def step(values, queries, documents):
        return contrastive.cached_gradient(model, values, queries, documents, 4)

    if keras.backend.backend() == "jax":
        import jax

        compiled = jax.jit(step)(values, queries, documents)
    else:
        import tensorflow as tf

        compiled = tf.function(step, jit_compile=True)(values, queries, documents)
    assert float(compiled.loss) == pytest.approx(float(eager.loss), abs=1e-6)
    _assert_gradients_equal(compiled.gradients, eager.gradients)


def test_a_chunk_that_does_not_divide_the_batch_is_refused():
    model = _encoder()
    rng = np.random.default_rng(5)
    with pytest.raises(ValueError, match="a chunk of 3 rows does not divide a batch of 8"):
        contrastive.cached_gradient(
            model, contrastive.current_values(model), _inputs(rng, 8), _inputs(rng, 8), 3
        )
