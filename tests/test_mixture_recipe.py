"""benchmarks/mixture_recipe.py: the quality task's negatives keep a document's words, the
held-out documents are a fixed fifth, and masked accuracy scores the seeded positions only."""

import random
import types

import numpy as np
import pytest

from benchmarks import mixture_recipe

torch = pytest.importorskip("torch")


def test_shuffled_keeps_the_words_and_the_split_is_fixed():
    text = "the quick brown fox jumps over the lazy dog " * 3
    assert sorted(mixture_recipe.shuffled(text, random.Random(0)).split()) == sorted(text.split())
    held = [mixture_recipe._held_out(f"document {i}") for i in range(2000)]
    assert held == [mixture_recipe._held_out(f"document {i}") for i in range(2000)]
    assert 0.15 < sum(held) / len(held) < 0.25  # a fifth


class _Oracle(torch.nn.Module):
    """Logits that know the original ids (`answers`): right wherever it is asked."""

    def __init__(self, answers, vocab: int):
        super().__init__()
        self.answers, self.vocab = torch.tensor(answers), vocab

    def forward(self, input_ids, attention_mask):
        rows = self.answers[: len(input_ids)]
        self.answers = self.answers[len(input_ids) :]
        return types.SimpleNamespace(logits=torch.nn.functional.one_hot(rows, self.vocab).float())


def test_masked_accuracy_scores_the_masked_non_special_tokens():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 50, size=(100, 16))
    ids[:, 0], ids[:, -1] = 0, 2  # <s> ... </s>
    mask = np.ones_like(ids)
    mask[:, 12:] = 0
    tokenizer = types.SimpleNamespace(all_special_ids=[0, 1, 2, 3, 4], mask_token_id=4)
    right, n = mixture_recipe.masked_accuracy(_Oracle(ids, 50), tokenizer, ids, mask, 0.15, 0)
    assert right == 1.0 and 0.1 * 100 * 11 < n < 0.2 * 100 * 11  # only tokens 1..11 qualify
    wrong = np.where(ids == 7, 8, 7)  # never the right id
    assert mixture_recipe.masked_accuracy(_Oracle(wrong, 50), tokenizer, ids, mask, 0.15, 0) == (
        0,
        n,
    )
