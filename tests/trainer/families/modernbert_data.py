"""Tiny ModernBERT models and batches for the tests (no downloads)."""

import numpy as np

CLS, SEP, PAD = 2, 3, 0
TINY = dict(vocabulary_size=100, num_layers=3, num_heads=2, hidden_dim=64, intermediate_dim=96)


def backbone(**overrides):
    from trainer.families.modernbert.backbone import ModernBertBackbone

    return ModernBertBackbone(**{**TINY, **overrides})


def documents(*lengths, seed=0, length=None):
    """One row of `[CLS] words [SEP]` documents of the given total lengths, padded to
    `length`."""
    rng = np.random.default_rng(seed)
    row = []
    for n in lengths:
        row += [CLS, *rng.integers(5, 100, n - 2).tolist(), SEP]
    length = length or len(row)
    return np.array(row + [PAD] * (length - len(row)), "int32")


def inputs(token_ids):
    token_ids = np.atleast_2d(token_ids).astype("int32")
    return {"token_ids": token_ids, "padding_mask": (token_ids != PAD).astype("int32")}


def hidden(model, token_ids):
    """The model called eagerly (no compiled predict function to build: faster here)."""
    from keras import ops

    return ops.convert_to_numpy(model(inputs(token_ids)))


def logits_beside_transformers(masked_lm, hf, ids, mask):
    """(ours, transformers') logits at every non-padding position of a batch."""
    import torch

    positions = np.tile(np.arange(ids.shape[1], dtype="int32"), (len(ids), 1))
    inputs = {"token_ids": ids, "padding_mask": mask, "mask_positions": positions}
    ours = np.asarray(masked_lm(inputs, training=False))
    with torch.no_grad():
        theirs = hf(
            input_ids=torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)
        )
    valid = mask.astype(bool)
    return ours[valid], theirs.logits.numpy()[valid]
