"""Masking statistics on many sequences, compiled (XLA / jax.jit) and not, on the backend the
tests run with (`make test` runs this file on TensorFlow and on JAX)."""

import hashlib

import keras
import numpy as np
import pytest

from common import word_tables
from trainer.data.masking import MaskingSpec, content_keys, mask_tokens, train_keys, uniforms


def compiled(fn):
    """`fn` compiled the way the train step is on this backend."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(fn)
    import tensorflow as tf

    return tf.function(fn, jit_compile=True)


def step_seed(seed, step, replica, batch=4096):
    """Keys of a replica's rows at a step (replica r holds global rows r*batch...)."""
    return train_keys(seed, step, np.arange(batch, dtype=np.int32) + replica * batch)


def as_numpy(out):
    return {k: keras.ops.convert_to_numpy(v) for k, v in out.items()}


SPECIAL = (0, 1, 2, 3, 4)  # pad, unk, cls, sep, mask
SPEC = MaskingSpec(vocab_size=100, mask_id=4, special_ids=SPECIAL)


def _batch(num=4096, length=64, seed=0):
    """Random lengths (padding), CLS/SEP at the ends and some UNKs inside."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 100, (num, length))
    lengths = rng.integers(3, length + 1, num)
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int32)
    ids[:, 0] = 2
    ids[np.arange(num), lengths - 1] = 3
    ids[rng.random((num, length)) < 0.02] = 1
    ids = np.where(mask == 1, ids, 0)
    return ids.astype(np.int32), mask


@pytest.fixture(scope="module")
def masked():
    ids, mask = _batch()
    run = compiled(lambda i, m, s: mask_tokens(i, m, s, SPEC))
    return ids, mask, as_numpy(run(ids, mask, step_seed(7, 3, 0, len(ids))))


def _selected(ids, out):
    rows = np.repeat(np.arange(len(ids))[:, None], out["mask_positions"].shape[1], axis=1)
    used = out["mask_weights"] > 0
    return rows[used], out["mask_positions"][used]


def test_selection_rate_is_15_percent_of_maskable_positions(masked):
    ids, mask, out = masked
    maskable = (mask == 1) & ~np.isin(ids, SPECIAL)
    rate = out["mask_weights"].sum() / maskable.sum()
    assert abs(rate - 0.15) < 0.005, rate
    # Per sequence it is floor(0.15 n + u): never more than one off 15 %.
    per_row = out["mask_weights"].sum(axis=1)
    assert np.all(np.abs(per_row - 0.15 * maskable.sum(axis=1)) < 1.0)


def test_never_special_or_padding_and_positions_distinct(masked):
    ids, mask, out = masked
    rows, cols = _selected(ids, out)
    assert not np.isin(ids[rows, cols], SPECIAL).any()
    assert (mask[rows, cols] == 1).all()
    pairs = set(zip(rows.tolist(), cols.tolist()))
    assert len(pairs) == len(rows)  # no position masked twice


def test_labels_are_the_original_tokens_and_only_selected_change(masked):
    ids, _, out = masked
    rows, cols = _selected(ids, out)
    used = out["mask_weights"] > 0
    np.testing.assert_array_equal(out["mask_ids"][used], ids[rows, cols])
    changed = out["token_ids"] != ids
    selected = np.zeros_like(changed)
    selected[rows, cols] = True
    assert not (changed & ~selected).any()


def test_80_10_10_split(masked):
    ids, _, out = masked
    rows, cols = _selected(ids, out)
    new, old = out["token_ids"][rows, cols], ids[rows, cols]
    is_mask = new == SPEC.mask_id
    is_same = new == old
    is_random = ~is_mask & ~is_same
    n = len(new)
    assert n > 15_000
    assert abs(is_mask.mean() - 0.8) < 0.015
    # A random draw equals the original 1/95 of the time: 10 % random shows as ~9.9 % + 0.1 %.
    assert abs(is_random.mean() - 0.1 * 94 / 95) < 0.012
    assert abs(is_same.mean() - (0.1 + 0.1 / 95)) < 0.012
    assert not np.isin(new[is_random], SPECIAL).any()
    # Random replacements cover the ordinary vocabulary.
    assert len(np.unique(new[is_random])) > 80


def test_seeds_differ_by_step_and_replica_and_repeat_exactly():
    ids, mask = _batch(64)

    def positions(keys):
        return keras.ops.convert_to_numpy(mask_tokens(ids, mask, keys, SPEC)["mask_positions"])

    base = positions(step_seed(1, 5, 0, 64))
    np.testing.assert_array_equal(base, positions(step_seed(1, 5, 0, 64)))
    assert (base != positions(step_seed(1, 6, 0, 64))).any()
    assert (base != positions(step_seed(1, 5, 1, 64))).any()
    assert (base != positions(step_seed(2, 5, 0, 64))).any()
    # Eval keys depend on each row's tokens only: the same row, wherever it is in a batch.
    keys = keras.ops.convert_to_numpy(content_keys(9, ids))
    np.testing.assert_array_equal(
        keys[::-1], keras.ops.convert_to_numpy(content_keys(9, ids[::-1]))
    )
    assert len(set(keys.tolist())) == len(keys)


def test_short_sequences_still_get_masked_at_the_expected_rate():
    """Sequences with 1-3 maskable tokens: expected rate stays 15 % (stochastic rounding)."""
    ids = np.zeros((4000, 8), np.int32)
    ids[:, 0], ids[:, 1:3], ids[:, 3] = 2, 50, 3
    mask = (ids != 0).astype(np.int32)
    out = as_numpy(mask_tokens(ids, mask, step_seed(0, 0, 0, 4000), SPEC))
    assert abs(out["mask_weights"].sum() / (2 * 4000) - 0.15) < 0.02


@pytest.mark.parametrize("mode", ["token", "whole_word", "span"])
def test_compiled_and_eager_masks_are_identical(mode):
    """The random stream is integer arithmetic: the same masks with and without the
    compiler (so a MirroredStrategy-on-CPU step, which cannot jit, masks as a TPU does)."""
    spec = {"token": SPEC, "whole_word": WWM, "span": SPAN}[mode]
    ids, mask = _words_batch(32, 128)
    keys = step_seed(3, 11, 1, 32)
    fast = as_numpy(compiled(lambda i, m, k: mask_tokens(i, m, k, spec))(ids, mask, keys))
    slow = as_numpy(mask_tokens(ids, mask, keys, spec))
    for key, value in fast.items():
        assert value.shape[0] == 32
        np.testing.assert_array_equal(value, slow[key])
    assert fast["mask_positions"].shape[1] == spec.max_predictions(128)


# Masks of one fixed batch, the same on TensorFlow and JAX (both runs of `make test` check
# these digests): every op is integer or exact, so the backends agree bit for bit.
GOLDEN = {
    "token": "f9ffd9fd26275859cccc7eda9c086c81",
    "span": "99f2c8ec68ff61bf31300fde2285e7d5",
    "whole_word": "82646113e25d1d8edb73c44d0c5170b2",
}


@pytest.mark.parametrize("mode", sorted(GOLDEN))
def test_masks_are_identical_on_every_backend(mode):
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 100, (64, 32)).astype("int32")
    ids[:, 0] = 2
    spec = MaskingSpec(
        100, 4, SPECIAL, masking=mode, word_starts=WORD_STARTS if mode == "whole_word" else ()
    )
    out = as_numpy(mask_tokens(ids, np.ones_like(ids), train_keys(1, 5, np.arange(64)), spec))
    digest = hashlib.md5(b"".join(out[k].tobytes() for k in sorted(out))).hexdigest()
    assert digest == GOLDEN[mode]
    first = keras.ops.convert_to_numpy(uniforms(np.array([0, 1], np.int32), 4))[0, 0]
    np.testing.assert_array_equal(
        first, np.array([0.9167772, 0.41964698, 0.94490606, 0.9225967], np.float32)
    )


# --- whole_word and span --------------------------------------------------------------------

# Ids 5..59 start a word, 60..99 continue one (as '▁x' / 'x' pieces of a unigram vocabulary).
WORD_STARTS = tuple(i < 60 for i in range(100))
WWM = MaskingSpec(
    vocab_size=100, mask_id=4, special_ids=SPECIAL, masking="whole_word", word_starts=WORD_STARTS
)
SPAN = MaskingSpec(vocab_size=100, mask_id=4, special_ids=SPECIAL, masking="span")
# As WWM, with ids 50..59 (starts) and 90..94 (continuations) ending a unit of an unspaced
# script (a Han character, '版' / '版' after '▁...'), 60..64 continuing a character (a
# combining mark, a byte of a character), 65..69 ending with a Han character's first bytes and
# 95..99 holding continuation bytes only (`word_tables.ENDS_*`): the token after a unit
# starts a word (a Latin run glued to Chinese) unless it is mid-character.
GLUED = MaskingSpec(
    vocab_size=100,
    mask_id=4,
    special_ids=SPECIAL,
    masking="whole_word",
    word_starts=WORD_STARTS,
    unit_ends=tuple(
        1 if 50 <= i < 60 or 90 <= i < 95 else 2 if 65 <= i < 70 else 3 if i >= 95 else 0
        for i in range(100)
    ),
    mid_character=tuple(60 <= i < 65 or i >= 95 for i in range(100)),
)


def _words_batch(num=2048, length=64, seed=1):
    """Rows of full length (as concatenated chunks are) with CLS/SEP document boundaries
    inside, words of 1-4 pieces, and a continuation piece at some rows' start."""
    rng = np.random.default_rng(seed)
    ids = np.where(
        rng.random((num, length)) < 0.45,
        rng.integers(60, 100, (num, length)),
        rng.integers(5, 60, (num, length)),
    )
    ids[:, 0] = 2
    ids[rng.random((num, length)) < 0.02] = 3
    short = rng.random(num) < 0.1  # some padded rows
    mask = np.ones_like(ids)
    mask[short, length // 2 :] = 0
    ids = np.where(mask == 1, ids, 0)
    return ids.astype(np.int32), mask.astype(np.int32)


def _units(ids, mask, spec):
    """(row, start, end) of every unit of whole words, per the table, among candidates."""
    candidate = (mask == 1) & ~np.isin(ids, SPECIAL)
    units = []
    for row in range(len(ids)):
        start = None
        starts = word_tables.starts_in(
            ids[row], spec.word_starts, spec.unit_ends, spec.mid_character
        )
        for pos in range(ids.shape[1] + 1):
            ends_here = (
                pos == ids.shape[1]
                or not candidate[row, pos]
                or (starts[pos] and start is not None)
            )
            if start is not None and ends_here:
                units.append((row, start, pos))
                start = None
            if pos < ids.shape[1] and candidate[row, pos] and start is None:
                start = pos
    return units


@pytest.fixture(scope="module", params=["whole_word", "span"])
def unit_masked(request):
    spec = WWM if request.param == "whole_word" else SPAN
    ids, mask = _words_batch()
    run = compiled(lambda i, m, s: mask_tokens(i, m, s, spec))
    out = as_numpy(run(ids, mask, step_seed(5, 2, 0, len(ids))))
    return spec, ids, mask, out


def _selected_grid(ids, out):
    rows, cols = _selected(ids, out)
    grid = np.zeros(ids.shape, bool)
    grid[rows, cols] = True
    assert len(rows) == grid.sum()  # no position twice
    return grid


def test_units_mask_15_percent_never_specials_labels_original(unit_masked):
    spec, ids, mask, out = unit_masked
    maskable = (mask == 1) & ~np.isin(ids, SPECIAL)
    grid = _selected_grid(ids, out)
    assert abs(grid.sum() / maskable.sum() - 0.15) < 0.003, grid.sum() / maskable.sum()
    assert not (grid & ~maskable).any()
    used = out["mask_weights"] > 0
    rows, cols = _selected(ids, out)
    np.testing.assert_array_equal(out["mask_ids"][used], ids[rows, cols])
    assert not ((out["token_ids"] != ids) & ~grid).any()
    assert out["mask_positions"].shape[1] == spec.max_predictions(64)
    assert spec.max_predictions(64) == {"whole_word": 18, "span": 20}[spec.masking]


@pytest.mark.parametrize("spec", [WWM, GLUED], ids=["spaced", "glued"])
def test_whole_words_are_never_split(spec):
    ids, mask = _words_batch(512)
    out = as_numpy(
        compiled(lambda i, m, k: mask_tokens(i, m, k, spec))(
            ids, mask, step_seed(1, 1, 0, len(ids))
        )
    )
    grid = _selected_grid(ids, out)
    whole = partial = 0
    for row, start, end in _units(ids, mask, spec):
        chosen = grid[row, start:end]
        if chosen.all():
            whole += end - start > 1
        partial += chosen.any() and not chosen.all()
    assert partial == 0
    assert whole > 500  # multi-piece words do get masked, whole


def test_a_token_after_an_unspaced_unit_starts_a_word_unless_it_continues_it():
    """A Latin run glued to Chinese (`文件foo.txt`) is a word of its own: the table of word
    starts alone cannot tell, the token before decides (`word_tables.unit_tables`)."""
    from trainer.data.masking import _word_starts

    ids, _ = _words_batch(256)
    got = keras.ops.convert_to_numpy(compiled(lambda i: _word_starts(i, GLUED))(ids))
    expected = np.array(
        [
            word_tables.starts_in(row, GLUED.word_starts, GLUED.unit_ends, GLUED.mid_character)
            for row in ids
        ]
    )
    np.testing.assert_array_equal(got, expected)
    spaced_only = np.array(WORD_STARTS)[ids]
    new = got & ~spaced_only
    assert new.sum() > 500  # continuation ids after a unit: now starts
    assert not new[:, 0].any() and not np.isin(ids[new], range(60, 65)).any()
    before = ids[:, :-1][new[:, 1:]]  # every new start follows a unit's end or its last bytes
    assert np.isin(before, [*range(50, 60), *range(90, 100)]).all()
    assert np.isin(before, range(95, 100)).sum() > 5


def test_span_lengths_follow_the_truncated_geometric():
    from trainer.data.masking import _unit_start_of, _unit_starts

    length = 256
    ids = np.full((400, length), 50, np.int32)  # no specials: spans are cut only by the cap
    candidates = np.ones(ids.shape, bool)
    uniform = np.random.default_rng(3).random(ids.shape, np.float32)
    starts = keras.ops.convert_to_numpy(_unit_starts(ids, candidates, uniform, SPAN))
    lengths = np.concatenate([np.diff(np.flatnonzero(row)) for row in starts])
    assert lengths.min() >= 1 and lengths.max() <= 10
    k = np.arange(1, 11)
    expected = 0.2 * 0.8 ** (k - 1) / (1 - 0.8**10)
    observed = np.bincount(lengths, minlength=11)[1:] / len(lengths)
    assert np.abs(observed - expected).max() < 0.01, observed
    assert abs(lengths.mean() - 3.80) < 0.05
    # Every position's unit starts at the last start at or before it.
    start_of = keras.ops.convert_to_numpy(_unit_start_of(starts))
    for row in range(3):
        expected_start = np.maximum.accumulate(np.where(starts[row], np.arange(length), 0))
        np.testing.assert_array_equal(start_of[row], expected_start)


def test_span_80_10_10_is_drawn_per_span_and_spans_are_contiguous():
    ids, mask = _words_batch(1024, 128)
    out = as_numpy(mask_tokens(ids, mask, step_seed(2, 2, 0, len(ids)), SPAN))
    grid = _selected_grid(ids, out)
    runs = mixed = masked_runs = 0
    for row in range(len(ids)):
        edges = np.flatnonzero(np.diff(np.concatenate([[0], grid[row], [0]]).astype(int)))
        for start, end in zip(edges[::2], edges[1::2]):
            runs += 1
            is_mask = out["token_ids"][row, start:end] == SPAN.mask_id
            # A run may join two adjacent spans, each with its own draw: count runs that
            # are neither all-mask nor mask-free only when short enough to be one span.
            if end - start <= 3 and is_mask.any() and not is_mask.all():
                mixed += 1
            masked_runs += is_mask.all()
    assert runs > 2000
    assert mixed / runs < 0.03  # only joined spans can mix
    assert abs(masked_runs / runs - 0.8) < 0.06
    mean_run = grid.sum() / runs
    assert mean_run > 3.0  # contiguous spans, not scattered tokens (token mode: ~1.2)


def test_whole_word_needs_a_table_and_modes_are_checked():
    with pytest.raises(ValueError, match="word_starts"):
        MaskingSpec(vocab_size=100, mask_id=4, special_ids=SPECIAL, masking="whole_word")
    with pytest.raises(ValueError, match="unit_ends and mid_character"):
        MaskingSpec(
            vocab_size=100,
            mask_id=4,
            special_ids=SPECIAL,
            masking="whole_word",
            word_starts=WORD_STARTS,
            unit_ends=(False,) * 100,
        )
    with pytest.raises(ValueError, match="not one of"):
        MaskingSpec(vocab_size=100, mask_id=4, special_ids=SPECIAL, masking="words")


@pytest.mark.parametrize("spec", [WWM, SPAN], ids=["whole_word", "span"])
def test_short_sequences_keep_the_rate_with_units(spec):
    ids = np.zeros((4000, 8), np.int32)
    ids[:, 0], ids[:, 1:3], ids[:, 3] = 2, 50, 3  # two one-piece words
    mask = (ids != 0).astype(np.int32)
    out = as_numpy(mask_tokens(ids, mask, step_seed(0, 0, 0, 4000), spec))
    assert abs(out["mask_weights"].sum() / (2 * 4000) - 0.15) < 0.02


def test_the_masking_flag_offers_exactly_the_modes():
    """trainer/pretraining/config.py keeps its choices literal (its --help imports no Keras)."""
    from trainer.data.masking import MODES
    from trainer.pretraining.config import MaskingFlags

    assert MaskingFlags.__dataclass_fields__["masking"].metadata["choices"] == MODES
