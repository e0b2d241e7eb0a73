"""Masking statistics on many sequences, and that it compiles with XLA."""

import numpy as np
import pytest
import tensorflow as tf

from trainer.masking import MaskingSpec, content_seed, mask_tokens, step_seed

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
    run = tf.function(lambda i, m, s: mask_tokens(i, m, s, SPEC), jit_compile=True)
    out = {k: v.numpy() for k, v in run(ids, mask, step_seed(7, 3, 0)).items()}
    return ids, mask, out


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

    def positions(seed):
        return mask_tokens(ids, mask, seed, SPEC)["mask_positions"].numpy()

    base = positions(step_seed(1, 5, 0))
    np.testing.assert_array_equal(base, positions(step_seed(1, 5, 0)))
    assert (base != positions(step_seed(1, 6, 0))).any()
    assert (base != positions(step_seed(1, 5, 1))).any()
    assert (base != positions(step_seed(2, 5, 0))).any()
    # Eval seeds depend on the tokens only.
    np.testing.assert_array_equal(content_seed(9, ids).numpy(), content_seed(9, ids).numpy())
    assert (content_seed(9, ids).numpy() != content_seed(9, ids[::-1]).numpy()).any()


def test_short_sequences_still_get_masked_at_the_expected_rate():
    """Sequences with 1-3 maskable tokens: expected rate stays 15 % (stochastic rounding)."""
    ids = np.zeros((4000, 8), np.int32)
    ids[:, 0], ids[:, 1:3], ids[:, 3] = 2, 50, 3
    mask = (ids != 0).astype(np.int32)
    out = mask_tokens(ids, mask, step_seed(0, 0, 0), SPEC)
    assert abs(out["mask_weights"].numpy().sum() / (2 * 4000) - 0.15) < 0.02


def test_compiles_with_xla_and_is_deterministic():
    """(XLA and TensorFlow kernels draw different Philox streams from one seed, so the
    trainer always masks inside XLA; here: compiled twice gives the same masks.)"""
    ids, mask = _batch(32, 128)
    seed = step_seed(3, 11, 1)
    compiled = tf.function(lambda i, m, s: mask_tokens(i, m, s, SPEC), jit_compile=True)
    hlo = compiled.experimental_get_compiler_ir(ids, mask, seed)(stage="hlo")
    assert "ENTRY" in hlo
    first, second = compiled(ids, mask, seed), compiled(ids, mask, seed)
    for key, value in first.items():
        assert value.shape[0] == 32
        np.testing.assert_array_equal(value.numpy(), second[key].numpy())
    assert first["mask_positions"].shape[1] == SPEC.max_predictions(128) == 20
