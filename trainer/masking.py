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

Three modes (`MaskingSpec.masking`), all with fixed shapes and the same 15 % budget:

* `token`: positions chosen independently (BERT, RoBERTa).
* `whole_word`: all sub-tokens of a chosen word together (BERT-wwm); a word starts at a
  token the tokenizer marks as a word start (`common.tokenizer_files.word_starts`), so words
  are whitespace-delimited for Metaspace/byte-level tokenizers and BERT-pre-tokenized for
  WordPiece. 80/10/10 is drawn per token, as BERT's whole-word masking does.
* `span`: contiguous spans whose lengths follow SpanBERT's geometric distribution
  (p = 0.2, truncated to 1..10 tokens, mean 3.8); 80/10/10 is drawn per span.

Words and spans are "units", taken whole in a random order up to the row's budget of
`rate * n` tokens; the unit that straddles the budget is taken with the probability of the
fraction of it inside, so the expected number of masked tokens stays `rate * n` whatever the
unit lengths.

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
    masking: str = "token"  # one of MODES
    word_starts: tuple = ()  # whole_word: per token id, True where a token starts a word
    span_p: float = 0.2  # span: geometric parameter of span lengths (SpanBERT)
    span_max: int = 10  # span: lengths truncated to 1..span_max

    def __post_init__(self):
        if self.masking not in MODES:
            raise ValueError(f"masking {self.masking!r} is not one of {MODES}")
        if self.masking == "whole_word" and len(self.word_starts) != self.vocab_size:
            raise ValueError("whole_word masking needs word_starts for every token id "
                             f"({len(self.word_starts)} given, vocabulary {self.vocab_size})")

    def max_predictions(self, sequence_length: int) -> int:
        """Slots per sequence; enough for `floor(rate * n + u)` with n <= sequence_length.

        The unit that straddles the budget may be taken whole, so words and spans get room
        for one more unit: a longest span, or a quarter more (at least 8) for words; a word
        that would still overflow is left out. The LM head runs on these slots only, so they
        cost little.
        """
        slots = max(1, math.ceil(self.rate * sequence_length))
        if self.masking == "whole_word":
            slots += max(8, math.ceil(slots / 4))
        elif self.masking == "span":
            slots += self.span_max
        return min(sequence_length, slots)


MODES = ("token", "whole_word", "span")


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


def _unit_starts(input_ids, candidates, uniform, spec: MaskingSpec) -> tf.Tensor:
    """bool [batch, length]: where a word (whole_word) or a span (span) begins.

    A non-candidate (special or pad) is a unit of its own and the token after it starts a
    new one, so no unit reaches across a document boundary or into padding.
    """
    length = input_ids.shape[1]
    if spec.masking == "whole_word":
        table = tf.constant(spec.word_starts, tf.bool)
        starts = tf.gather(table, input_ids)
    else:
        # Span lengths by inverse transform of the truncated geometric distribution, laid
        # end to end from position 0: starts are their running sums.
        q = 1.0 - spec.span_p
        lengths = 1.0 + tf.floor(tf.math.log(1.0 - uniform * (1.0 - q ** spec.span_max))
                                 / math.log(q))
        lengths = tf.clip_by_value(tf.cast(lengths, tf.int32), 1, spec.span_max)
        offsets = tf.cumsum(lengths, axis=1, exclusive=True)  # [batch, spans]
        pos = tf.range(length)
        starts = tf.reduce_any(tf.equal(offsets[:, :, None], pos[None, None, :]), axis=1)
    after_other = tf.pad(tf.logical_not(candidates[:, :-1]), [[0, 0], [1, 0]],
                         constant_values=True)
    return starts | tf.logical_not(candidates) | after_other


def _unit_start_of(starts) -> tf.Tensor:
    """int32 [batch, length]: the position where each position's unit begins (a running
    max of start positions, done as a masked max because XLA has no cumulative max)."""
    length = starts.shape[1]
    pos = tf.range(length)
    upto = pos[None, :] <= pos[:, None]  # [i, j]: j at or before i
    start_pos = tf.where(starts[:, None, :] & upto[None], pos[None, None, :], -1)
    return tf.reduce_max(start_pos, axis=2)


def _select_units(candidates, start_of, order, cut, budget, num_slots) -> tf.Tensor:
    """bool [batch, length]: whole units, taken in a random order, up to `budget` tokens
    (float [batch]) in expectation and never more than `num_slots`.

    A unit's order key is (`order` drawn at its start, start position), so ties between
    units are impossible. The unit that straddles the budget, `x` of its `l` tokens inside,
    is taken with probability x / l (it is in when `before + l * cut < budget`, `cut` drawn
    at its start): the expected count is then exactly the budget, for any unit lengths and
    for short rows too. Only candidate tokens count towards lengths and budgets.
    """
    score = tf.gather(order, start_of, batch_dims=1)
    cut = tf.gather(cut, start_of, batch_dims=1)
    cand = tf.cast(candidates, tf.int32)
    same = tf.equal(start_of[:, None, :], start_of[:, :, None])  # [batch, i, j]
    earlier = (score[:, None, :] < score[:, :, None]) | (
        tf.equal(score[:, None, :], score[:, :, None])
        & (start_of[:, None, :] < start_of[:, :, None]))
    unit_length = tf.reduce_sum(tf.cast(same, tf.int32) * cand[:, None, :], axis=2)
    before = tf.reduce_sum(tf.cast(earlier, tf.int32) * cand[:, None, :], axis=2)
    reach = tf.cast(before, tf.float32) + cut * tf.cast(unit_length, tf.float32)
    fits = before + unit_length <= num_slots
    return candidates & (reach < budget[:, None]) & fits


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
    choice = draws[1]
    if spec.masking == "token":
        num_to_mask = tf.cast(tf.floor(spec.rate * num_candidates + draws[3, :, 0]), tf.int32)
        num_to_mask = tf.minimum(num_to_mask, num_slots)
        ranks = _ranks(draws[0], candidates)
        selected = candidates & (ranks < num_to_mask[:, None])
        slot_of = ranks  # slot s holds the position whose rank is s
    else:
        # A draw of its own, so that `token` keeps its random stream.
        span_draws = tf.random.stateless_uniform(
            [batch, length], seed=tf.random.experimental.stateless_fold_in(
                seed, 1, alg="philox"), alg="philox")
        starts = _unit_starts(input_ids, candidates, span_draws, spec)
        start_of = _unit_start_of(starts)
        selected = _select_units(candidates, start_of, draws[0], draws[3],
                                 spec.rate * num_candidates, num_slots)
        # Exclusive running count: selected positions fill slots in position order.
        slot_of = tf.cumsum(tf.cast(selected, tf.int32), axis=1, exclusive=True)
        if spec.masking == "span":  # one 80/10/10 draw per span
            choice = tf.gather(choice, start_of, batch_dims=1)
    num_selected = tf.reduce_sum(tf.cast(selected, tf.int32), axis=1)

    # A one-hot match of slot and position instead of a gather/sort.
    slots = tf.range(num_slots)
    match = selected[:, None, :] & tf.equal(slot_of[:, None, :], slots[None, :, None])
    match = tf.cast(match, tf.int32)  # [batch, slots, length]
    mask_positions = tf.reduce_sum(match * tf.range(length)[None, None, :], axis=2)
    mask_ids = tf.reduce_sum(match * input_ids[:, None, :], axis=2)
    mask_weights = tf.cast(slots[None, :] < num_selected[:, None], tf.float32)

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
