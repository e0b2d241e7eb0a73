"""The contrastive loss of an embedding model (InfoNCE with in-batch negatives) and its
gradient for a batch larger than memory holds (gradient caching, GradCache).

`info_nce`: B queries and their documents, the B positives first, then the batch's hard
negatives (B*H rows, in any order: the loss does not depend on it), every vector already L2
normalised. Scores are q·dᵀ / temperature; query i's positive is document i, every other
document of the batch (the other positives, every hard negative) a negative; the loss is
the mean cross-entropy over the B queries. `symmetric=True` adds the document -> query term
over the positives and averages the two, as sentence-transformers'
MultipleNegativesSymmetricRankingLoss does. The default temperature, 0.05, is
sentence-transformers' MultipleNegativesRankingLoss's `scale=20.0` (its docstring: "scale = 1
/ temperature, so scale=20.0 is equivalent to temperature=0.05"). Written in `keras.ops` with
static shapes: it compiles with XLA on either backend.

`cached_gradient` (Gao et al. 2021, "Scaling Deep Contrastive Learning Batch Size under
Memory Limited Setup", GradCache): the loss of a big batch depends on the parameters only
through its embeddings, so its gradient is Σ_chunks vjp(embed_chunk, ∂loss/∂embeddings_chunk).
Three passes: (a) embed the batch chunk by chunk, no gradient kept; (b) the loss and its
gradient with respect to the embeddings (a few MB); (c) embed each chunk again, under
`backends.gradients.vjp`, and sum the parameter gradients the cached embedding gradients give.
Memory is one chunk's activations; the cost one extra forward pass. The model runs as
`stateless_call(..., training=True)`, each chunk from the non-trainable values (dropout's
seed state among them) it started from in (a), so that (c) replays (a)'s dropout masks exactly
(GradCache's RandContext): the gradient is the one of the loss (a) computed. Without dropout it
equals the whole batch's gradient in one pass, to float32 rounding.

Example:
    >>> step = cached_gradient(encoder, current_values(encoder), queries, documents, 2)
    >>> optimizer.apply(step.gradients, encoder.trainable_variables)
"""

from __future__ import annotations

from typing import NamedTuple

import keras
from keras import ops

from trainer.backends import gradients

# sentence-transformers' MultipleNegativesRankingLoss: scale=20.0, i.e. temperature 1/20
TEMPERATURE = 0.05


def info_nce(query_vectors, doc_vectors, temperature: float = TEMPERATURE, symmetric=False):
    """The mean InfoNCE loss (float32) of [B, D] queries against [B + B*H, D] documents,
    positives first; see the module's docstring."""
    queries = ops.cast(query_vectors, "float32")
    documents = ops.cast(doc_vectors, "float32")
    batch, rows = queries.shape[0], documents.shape[0]
    if rows < batch or rows % batch:
        raise ValueError(
            f"{rows} document vectors for {batch} queries: give B positives, then B*H negatives"
        )
    scores = ops.matmul(queries, ops.transpose(documents)) / temperature
    # row i's positive is column i: the diagonal of the [B, B + B*H] log-probabilities
    forward = -ops.mean(ops.diagonal(ops.log_softmax(scores, axis=-1)))
    if not symmetric:
        return forward
    backward = -ops.mean(ops.diagonal(ops.log_softmax(ops.transpose(scores[:, :batch]), axis=-1)))
    return (forward + backward) / 2


class CachedStep(NamedTuple):
    """What `cached_gradient` returns (a NamedTuple: a JAX pytree, so it leaves a jit)."""

    loss: object  # the big batch's loss, float32
    gradients: list  # one per trainable variable, in `model.trainable_variables`' order
    non_trainable: list  # the non-trainable values after the step (dropout's seeds moved on)


def current_values(model) -> tuple[list, list]:
    """(trainable, non-trainable) values of a built model's variables, as `stateless_call`
    takes them."""
    return (
        [variable.value for variable in model.trainable_variables],
        [variable.value for variable in model.non_trainable_variables],
    )


def _examples(inputs) -> int:
    """The examples of a batch: its rows, or a packed batch's `example_starts`."""
    if isinstance(inputs, dict) and "example_starts" in inputs:
        return inputs["example_starts"].shape[0]
    return keras.tree.flatten(inputs)[0].shape[0]


def _chunks(inputs, chunk_size: int) -> list:
    """`inputs` (an array or a structure of arrays, batch first) cut into the chunks of
    `chunk_size` examples each: every array cut into as many equal pieces (a packed batch's
    rows, `packed_rows.Packed.features(rows, chunk)`, hold each chunk apart)."""
    examples = _examples(inputs)
    if examples % chunk_size:
        raise ValueError(f"a chunk of {chunk_size} rows does not divide a batch of {examples}")
    count = examples // chunk_size

    def piece(array, number):
        size = array.shape[0] // count
        return array[number * size : (number + 1) * size]

    return [
        keras.tree.map_structure(lambda array, n=number: piece(array, n), inputs)
        for number in range(count)
    ]


def embed_chunks(model, values: tuple[list, list], inputs, chunk_size: int):
    """Pass (a): (the chunks' embeddings, concatenated, with no gradient; the non-trainable
    values each chunk started from; those after the last chunk)."""
    trainable, non_trainable = values
    vectors, starts = [], []
    for chunk in _chunks(inputs, chunk_size):
        starts.append(non_trainable)
        output, non_trainable = model.stateless_call(trainable, non_trainable, chunk, training=True)
        vectors.append(ops.stop_gradient(output))
    return ops.concatenate(vectors, axis=0), starts, non_trainable


def _backward_chunks(model, trainable, inputs, starts, cached, chunk_size: int) -> list:
    """Pass (c): Σ over chunks of the parameters' gradient given the chunk's cached
    embedding gradient, each chunk run again from the state it started from in (a)."""
    total = [ops.zeros_like(value) for value in trainable]
    for number, (chunk, start) in enumerate(zip(_chunks(inputs, chunk_size), starts)):

        def embed(values, chunk=chunk, start=start):
            return model.stateless_call(values, start, chunk, training=True)

        cotangent = cached[number * chunk_size : (number + 1) * chunk_size]
        _, _, grads = gradients.vjp(embed, trainable, cotangent)
        total = [ops.add(sum_, ops.cast(grad, sum_.dtype)) for sum_, grad in zip(total, grads)]
    return total


def batch_gradient(model, values, queries, documents, loss=info_nce) -> CachedStep:
    """A `CachedStep` computed in one pass over the whole batch (no caching): what
    `cached_gradient` equals, at the memory of every row's activations at once."""
    trainable, non_trainable = values

    def batch_loss(weights):
        query_vectors, after = model.stateless_call(weights, non_trainable, queries, training=True)
        doc_vectors, after = model.stateless_call(weights, after, documents, training=True)
        return loss(query_vectors, doc_vectors), after

    value, after, grads = gradients.vjp(batch_loss, trainable, 1.0)
    return CachedStep(value, list(grads), after)


def cached_gradient(model, values, queries, documents, chunk_size: int, loss=info_nce):
    """A `CachedStep`: the loss of `model`'s embeddings of `queries` and `documents` (inputs
    as the model takes them, batch first; documents: B positives then B*H negatives) and its
    gradient, `chunk_size` rows at a time; `values` = (trainable, non-trainable) values
    (`current_values(model)`, or a JAX train step's own). `loss(q, d) -> float32 scalar`."""
    trainable, non_trainable = values
    query_vectors, query_starts, non_trainable = embed_chunks(
        model, (trainable, non_trainable), queries, chunk_size
    )
    doc_vectors, doc_starts, non_trainable = embed_chunks(
        model, (trainable, non_trainable), documents, chunk_size
    )

    def batch_loss(vectors):
        return loss(vectors[0], vectors[1]), None

    value, _, (query_cache, doc_cache) = gradients.vjp(
        batch_loss, [query_vectors, doc_vectors], 1.0
    )
    query_grads = _backward_chunks(model, trainable, queries, query_starts, query_cache, chunk_size)
    doc_grads = _backward_chunks(model, trainable, documents, doc_starts, doc_cache, chunk_size)
    total = [ops.add(a, b) for a, b in zip(query_grads, doc_grads)]
    return CachedStep(value, total, non_trainable)
