"""Dynamic masking that runs inside the XLA-compiled train step (dense, stateless, sort-free).

keras-hub's `MaskedLMMaskGenerator` uses ragged tensors and tf_text ops, so it cannot run
under `jit_compile`; this module does the same job with fixed shapes only:

* candidates are the positions that are neither padding nor special tokens;
* each sequence masks `floor(rate * n_candidates + u)` of them (u ~ U[0, 1), so the
  expected rate is exactly `rate` even for short sequences), chosen by the rank of a random
  score per position (a sort-free rank: `top_k` in the XLA step measured ~5x slower per
  step on CPU);
* of the chosen positions 80 % become the mask token, 10 % a random non-special token and
  10 % stay unchanged;
* the outputs are the fixed-size `mask_positions` / `mask_ids` / `mask_weights` that
  keras-hub's MaskedLM heads expect, so the LM head runs only on `max_predictions` slots.

Example:
    >>> spec = MaskingSpec(vocab_size=1000, mask_id=4, special_ids=(0, 1, 2, 3, 4))
    >>> out = mask_tokens(input_ids, attention_mask, tf.constant([7, 0]), spec)
    >>> out["token_ids"], out["mask_positions"], out["mask_ids"], out["mask_weights"]
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class MaskingSpec:
    """What masking needs to know about the tokenizer, and the masking rates."""

    vocab_size: int
    mask_id: int
    special_ids: tuple  # ids never selected and never drawn as random replacements
    rate: float = 0.15
    mask_fraction: float = 0.8  # of the selected: replaced by mask_id
    random_fraction: float = 0.1  # of the selected: replaced by a random non-special token

    def max_predictions(self, sequence_length: int) -> int:
        """Slots per sequence; enough for `floor(rate * n + u)` with n <= sequence_length."""
        return max(1, math.ceil(self.rate * sequence_length))


def step_seed(seed, step, replica_id) -> tf.Tensor:
    """A stateless-RNG seed (int32[2]) that differs for every (seed, step, replica).

    Example:
        >>> step_seed(42, optimizer.iterations, replica_id)
    """
    base = tf.stack([tf.cast(seed, tf.int32), tf.constant(0x5EED, tf.int32)])
    folded = tf.random.experimental.stateless_fold_in(base, tf.cast(step, tf.int64), alg="philox")
    return tf.random.experimental.stateless_fold_in(folded, tf.cast(replica_id, tf.int64), alg="philox")


def content_seed(seed, input_ids) -> tf.Tensor:
    """A seed that depends only on a batch's tokens: eval masks are then the same every run
    and every evaluation, whatever step the model is at."""
    ids = tf.cast(input_ids, tf.int32)
    position_weights = tf.range(1, tf.shape(ids)[1] + 1, dtype=tf.int32) * 7919
    row_weights = tf.range(1, tf.shape(ids)[0] + 1, dtype=tf.int32) * 104729
    # int32 wrap-around is fine for a hash.
    digest = tf.reduce_sum(ids * position_weights[None, :] * row_weights[:, None])
    base = tf.stack([tf.cast(seed, tf.int32), tf.constant(0xE7A1, tf.int32)])
    return tf.random.experimental.stateless_fold_in(base, tf.cast(digest, tf.int64), alg="philox")


def _random_non_special(uniform, spec: MaskingSpec) -> tf.Tensor:
    """Maps U[0, 1) to a uniform token id that is not special.

    Draws from the `vocab_size - len(special_ids)` ordinary ids and shifts past each special
    id in ascending order, which is a bijection onto the non-special ids.
    """
    specials = sorted(set(spec.special_ids))
    num_ordinary = spec.vocab_size - len(specials)
    ids = tf.minimum(tf.cast(uniform * num_ordinary, tf.int32), num_ordinary - 1)
    for special in specials:
        ids = ids + tf.cast(ids >= special, tf.int32)
    return ids


def _candidates(input_ids, attention_mask, spec: MaskingSpec) -> tf.Tensor:
    is_special = tf.zeros_like(input_ids, dtype=tf.bool)
    for special in sorted(set(spec.special_ids)):
        is_special = is_special | tf.equal(input_ids, special)
    return tf.logical_and(tf.cast(attention_mask, tf.bool), tf.logical_not(is_special))


def _ranks(scores, candidates) -> tf.Tensor:
    """Rank of each candidate's score among its row's candidates (0 = smallest), no sort.

    Ties (vanishingly rare) are broken by position so ranks are always distinct.
    """
    length = tf.shape(scores)[1]
    scores = tf.where(candidates, scores, 2.0)  # non-candidates rank after every candidate
    pos = tf.range(length)
    before = (scores[:, None, :] < scores[:, :, None]) | (
        (scores[:, None, :] == scores[:, :, None]) & (pos[None, None, :] < pos[None, :, None])
    )  # [batch, i, j]: j ranks before i
    return tf.reduce_sum(tf.cast(before, tf.int32), axis=2)


def mask_tokens(input_ids, attention_mask, seed, spec: MaskingSpec) -> dict:
    """Masks a batch of fixed-length sequences; shapes are static, XLA-friendly.

    Args:
        input_ids: int [batch, length] token ids.
        attention_mask: int [batch, length], 1 for real tokens, 0 for padding.
        seed: int32[2] stateless seed (see `step_seed`, `content_seed`).
        spec: a `MaskingSpec`.

    Returns:
        dict with `token_ids` (int32 [batch, length], the corrupted input), `padding_mask`
        (int32 [batch, length]), `mask_positions` (int32 [batch, P]), `mask_ids` (int32
        [batch, P], the original tokens at those positions) and `mask_weights`
        (float32 [batch, P], 1 for used slots, 0 for unused ones), P = max_predictions.
    """
    input_ids = tf.cast(input_ids, tf.int32)
    batch, length = tf.shape(input_ids)[0], input_ids.shape[1]
    num_slots = spec.max_predictions(length)
    # Philox everywhere: "auto_select" picks other algorithms with and without XLA.
    draws = tf.random.stateless_uniform([4, batch, length], seed=seed, alg="philox")
    candidates = _candidates(input_ids, attention_mask, spec)

    num_candidates = tf.reduce_sum(tf.cast(candidates, tf.float32), axis=1)
    num_to_mask = tf.cast(tf.floor(spec.rate * num_candidates + draws[3, :, 0]), tf.int32)
    num_to_mask = tf.minimum(num_to_mask, num_slots)
    ranks = _ranks(draws[0], candidates)
    selected = candidates & (ranks < num_to_mask[:, None])

    # Slot s holds the position whose rank is s: a one-hot match instead of a gather/sort.
    slots = tf.range(num_slots)
    match = selected[:, None, :] & tf.equal(ranks[:, None, :], slots[None, :, None])
    match = tf.cast(match, tf.int32)  # [batch, slots, length]
    mask_positions = tf.reduce_sum(match * tf.range(length)[None, None, :], axis=2)
    mask_ids = tf.reduce_sum(match * input_ids[:, None, :], axis=2)
    mask_weights = tf.cast(slots[None, :] < num_to_mask[:, None], tf.float32)

    choice = draws[1]
    replacement = tf.where(
        choice < spec.mask_fraction,
        spec.mask_id,
        tf.where(
            choice < spec.mask_fraction + spec.random_fraction,
            _random_non_special(draws[2], spec),
            input_ids,
        ),
    )
    token_ids = tf.where(selected, replacement, input_ids)
    return {
        "token_ids": token_ids,
        "padding_mask": tf.cast(attention_mask, tf.int32),
        "mask_positions": mask_positions,
        "mask_ids": mask_ids,
        "mask_weights": mask_weights,
    }
