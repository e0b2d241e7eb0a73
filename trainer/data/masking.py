"""Dynamic masking that runs inside the compiled train step (dense, stateless, sort-free),
written once in `keras.ops` for both backends (TensorFlow/XLA and JAX's jit).

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
  token the tokenizer marks as a word start (`common.word_tables.word_starts`), so words
  are whitespace-delimited for Metaspace/byte-level tokenizers and BERT-pre-tokenized for
  WordPiece, and in scripts written without spaces (Chinese, Japanese, Thai, ...) every
  token that begins a character (cluster) starts one (`common.word_units`), and so does
  the token after one that ends such a character, unless it continues that character (a
  Latin run glued to Chinese, `文件foo.txt`, is a word of its own): three tables per token
  id, looked up here. 80/10/10 is drawn per token, as BERT's whole-word masking does.
* `span`: contiguous spans whose lengths follow SpanBERT's geometric distribution
  (p = 0.2, truncated to 1..10 tokens, mean 3.8); 80/10/10 is drawn per span.

Words and spans are "units", taken whole in a random order up to the row's budget of
`rate * n` tokens; the unit that straddles the budget is taken with the probability of the
fraction of it inside, so the expected number of masked tokens stays `rate * n` whatever the
unit lengths.

Randomness is a counter-based integer hash (`mix`, int32 arithmetic that wraps the same way
on every backend) rather than `keras.random`: each row has a 32-bit key, each of its draws is
`mix(key ^ mix(counter))`. The uniforms are exact 24-bit fractions and every later step is an
integer op or an exact comparison (span lengths by comparison with the truncated geometric
CDF, not a logarithm), so the masks are bit-identical on TensorFlow and JAX, compiled or not.
Row keys are a function of (seed, step, global row) in training (`train_keys`: the row's
place in the global batch, hence also independent of the replica count) and of the row's
tokens in evaluation (`content_keys`).

Example:
    >>> spec = MaskingSpec(vocab_size=1000, mask_id=4, special_ids=(0, 1, 2, 3, 4))
    >>> keys = train_keys(seed=42, step=7, rows=np.arange(32))
    >>> out = mask_tokens(input_ids, attention_mask, keys, spec)
    >>> out["token_ids"], out["mask_positions"], out["mask_ids"], out["mask_weights"]
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from keras import ops


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
    # whole_word, optional (`word_tables.unit_tables`): per token id, how it ends (0 in
    # no unit of an unspaced script, 1 with one, 2 inside one's bytes, 3 continuation bytes
    # only) and whether it begins mid-character (then it continues).
    unit_ends: tuple = ()
    mid_character: tuple = ()
    span_p: float = 0.2  # span: geometric parameter of span lengths (SpanBERT)
    span_max: int = 10  # span: lengths truncated to 1..span_max

    def __post_init__(self):
        if self.masking not in MODES:
            raise ValueError(f"masking {self.masking!r} is not one of {MODES}")
        if self.masking == "whole_word" and len(self.word_starts) != self.vocab_size:
            raise ValueError(
                "whole_word masking needs word_starts for every token id "
                f"({len(self.word_starts)} given, vocabulary {self.vocab_size})"
            )
        if {len(self.unit_ends), len(self.mid_character)} - {0} - {self.vocab_size} or (
            len(self.unit_ends) != len(self.mid_character)
        ):
            raise ValueError(
                "unit_ends and mid_character need an entry for every token id "
                f"({len(self.unit_ends)}, {len(self.mid_character)} given, "
                f"vocabulary {self.vocab_size})"
            )

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


# --- The counter-based hash -----------------------------------------------------------------

_M1 = np.int32(0x7FEB352D)  # lowbias32 multipliers (C. Wellons' hash-prospector), as int32
_M2 = np.int32(0x846CA68B - 2**32)
_GOLDEN = np.int32(0x61C88647)
NUM_DRAWS = 5  # rank scores, 80/10/10 choice, replacement token, row count, span lengths


def _srl(x, bits: int):
    """Logical right shift of int32 bit patterns (backends shift signed ints arithmetically)."""
    return ops.bitwise_and(ops.right_shift(x, bits), np.int32((1 << (32 - bits)) - 1))


def mix(x):
    """lowbias32 on int32: multiplies wrap modulo 2**32 on every backend."""
    x = ops.cast(x, "int32")
    x = ops.bitwise_xor(x, _srl(x, 16)) * _M1
    x = ops.bitwise_xor(x, _srl(x, 15)) * _M2
    return ops.bitwise_xor(x, _srl(x, 16))


def fold(key, data):
    """A new key from a key and an int32 datum (`jax.random.fold_in` in spirit)."""
    return mix(ops.bitwise_xor(ops.cast(key, "int32"), mix(ops.cast(data, "int32") + _GOLDEN)))


def train_keys(seed, step, rows):
    """int32 [batch]: one key per row from (seed, step, the row's place in the global batch).

    Example:
        >>> train_keys(42, 7, np.arange(4)).shape
        (4,)
    """
    base = fold(fold(np.int32(0x5EED), np.int32(seed)), step)
    return fold(base, rows)


def content_keys(seed, input_ids):
    """int32 [batch]: keys that depend only on each row's tokens (and `seed`), so evaluation
    masks a row the same way in every run, at every step, on every backend and replica."""
    ids = ops.cast(input_ids, "int32")
    positions = ops.arange(ids.shape[1], dtype="int32")[None, :]
    digest = ops.sum(mix(ops.bitwise_xor(ids, mix(positions + _GOLDEN))), axis=1)
    return fold(fold(np.int32(0xE7A1), np.int32(seed)), digest)


def uniforms(keys, length: int):
    """float32 [NUM_DRAWS, batch, length] in [0, 1): exact multiples of 2**-24."""
    counter = ops.arange(NUM_DRAWS * length, dtype="int32")
    counter = ops.reshape(counter, (NUM_DRAWS, 1, length))
    bits = mix(ops.bitwise_xor(ops.cast(keys, "int32")[None, :, None], mix(counter + _GOLDEN)))
    return ops.cast(_srl(bits, 8), "float32") * np.float32(2.0**-24)


# --- Selection ------------------------------------------------------------------------------


def _random_non_special(uniform, spec: MaskingSpec):
    """Maps U[0, 1) to a uniform token id that is not special.

    Draws from the `vocab_size - len(special_ids)` ordinary ids and shifts past each special
    id in ascending order, which is a bijection onto the non-special ids.
    """
    specials = sorted(set(spec.special_ids))
    num_ordinary = spec.vocab_size - len(specials)
    ids = ops.minimum(ops.cast(uniform * num_ordinary, "int32"), num_ordinary - 1)
    for special in specials:
        ids = ids + ops.cast(ids >= special, "int32")
    return ids


def _candidates(input_ids, attention_mask, spec: MaskingSpec):
    is_special = ops.zeros_like(input_ids, dtype="bool")
    for special in sorted(set(spec.special_ids)):
        is_special = ops.logical_or(is_special, ops.equal(input_ids, special))
    return ops.logical_and(ops.cast(attention_mask, "bool"), ops.logical_not(is_special))


def _ranks(scores, candidates):
    """Rank of each candidate's score among its row's candidates (0 = smallest), no sort.

    Ties are broken by position so ranks are always distinct.
    """
    scores = ops.where(candidates, scores, 2.0)  # non-candidates rank after every candidate
    pos = ops.arange(scores.shape[1], dtype="int32")
    before = ops.logical_or(
        scores[:, None, :] < scores[:, :, None],
        ops.logical_and(
            ops.equal(scores[:, None, :], scores[:, :, None]),
            pos[None, None, :] < pos[None, :, None],
        ),
    )  # [batch, i, j]: j before i
    return ops.sum(ops.cast(before, "int32"), axis=2)


def span_length_cdf(spec: MaskingSpec) -> np.ndarray:
    """F(k) = P(length <= k), k = 1..span_max-1, of the truncated geometric distribution."""
    q = 1.0 - spec.span_p
    k = np.arange(1, spec.span_max)
    return ((1.0 - q**k) / (1.0 - q**spec.span_max)).astype(np.float32)


def _unit_starts(input_ids, candidates, uniform, spec: MaskingSpec):
    """bool [batch, length]: where a word (whole_word) or a span (span) begins.

    A non-candidate (special or pad) is a unit of its own and the token after it starts a
    new one, so no unit reaches across a document boundary or into padding.
    """
    length = input_ids.shape[1]
    if spec.masking == "whole_word":
        starts = _word_starts(input_ids, spec)
    else:
        # Span lengths by inverse transform, as comparisons with the CDF (exact on every
        # backend), laid end to end from position 0: starts are their running sums.
        cdf = ops.convert_to_tensor(span_length_cdf(spec))
        lengths = 1 + ops.sum(ops.cast(uniform[:, :, None] >= cdf, "int32"), axis=2)
        offsets = ops.cumsum(lengths, axis=1) - lengths  # [batch, spans], exclusive
        pos = ops.arange(length, dtype="int32")
        starts = ops.any(ops.equal(offsets[:, :, None], pos[None, None, :]), axis=1)
    not_candidate = ops.logical_not(candidates)
    after_other = ops.concatenate([ops.ones_like(candidates[:, :1]), not_candidate[:, :-1]], axis=1)
    return ops.logical_or(ops.logical_or(starts, not_candidate), after_other)


def _word_starts(input_ids, spec: MaskingSpec):
    """bool [batch, length]: a word-start token, or one after the end of a unit of an
    unspaced script that does not continue its character (`word_tables.starts_in` is
    the same steps in NumPy: continuation bytes end the unit whose first bytes came up to
    3 tokens before)."""

    def table(values, dtype):
        return ops.take(ops.convert_to_tensor(np.array(values, dtype)), input_ids)

    def after(flags):
        return ops.concatenate([ops.zeros_like(flags[:, :1]), flags[:, :-1]], axis=1)

    starts = table(spec.word_starts, bool)
    if not spec.unit_ends:
        return starts
    code = table(spec.unit_ends, np.int32)
    tail, inside = ops.equal(code, 3), ops.equal(code, 2)  # word_tables.ENDS_*
    in_unit = inside
    for _ in range(3):
        in_unit = ops.logical_or(inside, ops.logical_and(tail, after(in_unit)))
    ends = ops.logical_or(ops.equal(code, 1), ops.logical_and(tail, after(in_unit)))
    opens = ops.logical_not(table(spec.mid_character, bool))
    return ops.logical_or(starts, ops.logical_and(after(ends), opens))


def _unit_start_of(starts):
    """int32 [batch, length]: the position where each position's unit begins (a running
    max of start positions, done as a masked max because XLA has no cumulative max)."""
    pos = ops.arange(starts.shape[1], dtype="int32")
    upto = pos[None, :] <= pos[:, None]  # [i, j]: j at or before i
    start_pos = ops.where(ops.logical_and(starts[:, None, :], upto[None]), pos[None, None, :], -1)
    return ops.max(start_pos, axis=2)


def _select_units(candidates, start_of, order, cut, budget, num_slots):
    """bool [batch, length]: whole units, taken in a random order, up to `budget` tokens
    (float [batch]) in expectation and never more than `num_slots`.

    A unit's order key is (`order` drawn at its start, start position), so ties between
    units are impossible. The unit that straddles the budget, `x` of its `l` tokens inside,
    is taken with probability x / l (it is in when `before + l * cut < budget`, `cut` drawn
    at its start): the expected count is then exactly the budget, for any unit lengths and
    for short rows too. Only candidate tokens count towards lengths and budgets.
    """
    score = ops.take_along_axis(order, start_of, axis=1)
    cut = ops.take_along_axis(cut, start_of, axis=1)
    cand = ops.cast(candidates, "int32")
    same = ops.equal(start_of[:, None, :], start_of[:, :, None])  # [batch, i, j]
    earlier = ops.logical_or(
        score[:, None, :] < score[:, :, None],
        ops.logical_and(
            ops.equal(score[:, None, :], score[:, :, None]),
            start_of[:, None, :] < start_of[:, :, None],
        ),
    )
    unit_length = ops.sum(ops.cast(same, "int32") * cand[:, None, :], axis=2)
    before = ops.sum(ops.cast(earlier, "int32") * cand[:, None, :], axis=2)
    reach = ops.cast(before, "float32") + cut * ops.cast(unit_length, "float32")
    fits = before + unit_length <= num_slots
    return ops.logical_and(ops.logical_and(candidates, reach < budget[:, None]), fits)


def _select(input_ids, candidates, draws, spec: MaskingSpec, num_slots: int):
    """(selected bool [batch, length], slot of each position, the 80/10/10 choice draw)."""
    num_candidates = ops.sum(ops.cast(candidates, "float32"), axis=1)
    choice = draws[1]
    if spec.masking == "token":
        num_to_mask = ops.cast(ops.floor(spec.rate * num_candidates + draws[3, :, 0]), "int32")
        num_to_mask = ops.minimum(num_to_mask, num_slots)
        ranks = _ranks(draws[0], candidates)
        return ops.logical_and(candidates, ranks < num_to_mask[:, None]), ranks, choice
    starts = _unit_starts(input_ids, candidates, draws[4], spec)
    start_of = _unit_start_of(starts)
    selected = _select_units(
        candidates, start_of, draws[0], draws[3], spec.rate * num_candidates, num_slots
    )
    # Exclusive running count: selected positions fill slots in position order.
    as_int = ops.cast(selected, "int32")
    slot_of = ops.cumsum(as_int, axis=1) - as_int
    if spec.masking == "span":  # one 80/10/10 draw per span
        choice = ops.take_along_axis(choice, start_of, axis=1)
    return selected, slot_of, choice


def mask_tokens(input_ids, attention_mask, keys, spec: MaskingSpec) -> dict:
    """Masks a batch of fixed-length sequences; shapes are static, jit-friendly.

    Args:
        input_ids: int [batch, length] token ids.
        attention_mask: int [batch, length], 1 for real tokens, 0 for padding.
        keys: int32 [batch], one random key per row (`train_keys`, `content_keys`).
        spec: a `MaskingSpec`.

    Returns:
        dict with `token_ids` (int32 [batch, length], the corrupted input), `padding_mask`
        (int32 [batch, length]), `mask_positions` (int32 [batch, P]), `mask_ids` (int32
        [batch, P], the original tokens at those positions) and `mask_weights`
        (float32 [batch, P], 1 for used slots, 0 for unused ones), P = max_predictions.
    """
    input_ids = ops.cast(input_ids, "int32")
    length = input_ids.shape[1]
    num_slots = spec.max_predictions(length)
    draws = uniforms(keys, length)
    candidates = _candidates(input_ids, attention_mask, spec)
    selected, slot_of, choice = _select(input_ids, candidates, draws, spec, num_slots)
    num_selected = ops.sum(ops.cast(selected, "int32"), axis=1)

    # A one-hot match of slot and position instead of a gather/sort.
    slots = ops.arange(num_slots, dtype="int32")
    match = ops.logical_and(
        selected[:, None, :], ops.equal(slot_of[:, None, :], slots[None, :, None])
    )
    match = ops.cast(match, "int32")  # [batch, slots, length]
    mask_positions = ops.sum(match * ops.arange(length, dtype="int32")[None, None, :], axis=2)
    mask_ids = ops.sum(match * input_ids[:, None, :], axis=2)
    mask_weights = ops.cast(slots[None, :] < num_selected[:, None], "float32")

    replacement = ops.where(
        choice < spec.mask_fraction,
        spec.mask_id,
        ops.where(
            choice < spec.mask_fraction + spec.random_fraction,
            _random_non_special(draws[2], spec),
            input_ids,
        ),
    )
    return {
        "token_ids": ops.where(selected, ops.cast(replacement, "int32"), input_ids),
        "padding_mask": ops.cast(attention_mask, "int32"),
        "mask_positions": mask_positions,
        "mask_ids": mask_ids,
        "mask_weights": mask_weights,
    }
