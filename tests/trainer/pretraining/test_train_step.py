"""The Keras model around a keras-hub MaskedLM: raw batches in, masking inside the XLA step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from trainer import families
from trainer.data.masking import MaskingSpec
from trainer.models.model import backbone_config, build_masked_lm
from trainer.pretraining.train_step import MaskedLMTrainer
from trainer.training.optimizer import build_optimizer

BERT = families.get("bert")


@pytest.mark.slow
def test_bert_trains_from_raw_batches_with_jit_compile():
    keras.utils.set_random_seed(0)
    config = backbone_config(
        BERT, "tiny", 100, 16, dict(num_layers=1, hidden_dim=32, intermediate_dim=64)
    )
    model = MaskedLMTrainer(build_masked_lm(BERT, config), MaskingSpec(100, 4, (0, 1, 2, 3, 4)))
    ids = np.random.default_rng(0).integers(5, 100, (32, 16)).astype("int32")
    ids[:, 0], ids[:, -1] = 2, 3
    batch = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    out = model(batch)  # an evaluation batch (no step): masks keyed by content
    assert out["logits"].shape == (32, 3, 100) and out["mask_weights"].shape == (32, 3)
    model.compile(optimizer=build_optimizer(1e-2, 20, 2), jit_compile=True)
    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    before = model.evaluate(dataset.take(1), verbose=0, return_dict=True)
    again = model.evaluate(dataset.take(1), verbose=0, return_dict=True)
    assert before == again  # evaluation masks are fixed
    model.fit(dataset, steps_per_epoch=10, epochs=1, verbose=0)
    after = model.evaluate(dataset.take(1), verbose=0, return_dict=True)
    assert int(model.optimizer.iterations.numpy()) == 10
    assert after["loss"] < before["loss"] and after["perplexity"] < before["perplexity"]


def test_ids_outside_the_vocabulary_make_the_compiled_loss_nan_not_zero():
    """On JAX the compiled cross-entropy scored an out-of-vocabulary target 0.0 (loss 0.0,
    perplexity 1.0): the stop on a non-finite loss never fired. Both backends now say NaN."""
    keras.utils.set_random_seed(0)
    config = backbone_config(
        BERT, "tiny", 100, 16, dict(num_layers=1, hidden_dim=16, intermediate_dim=32)
    )
    model = MaskedLMTrainer(build_masked_lm(BERT, config), MaskingSpec(100, 4, (0, 1, 2, 3, 4)))
    ids = np.random.default_rng(0).integers(5, 100, (8, 16)).astype("int32")
    model({"input_ids": ids, "attention_mask": np.ones_like(ids)})  # built on good ids
    model.compile(optimizer=build_optimizer(1e-2, 20, 2), jit_compile=True)
    batch = {"input_ids": ids + 100, "attention_mask": np.ones_like(ids)}  # every id beyond
    logs = model.test_on_batch(batch, return_dict=True)
    assert np.isnan(logs["loss"]) and np.isnan(logs["perplexity"])
    good = model.test_on_batch({**batch, "input_ids": ids}, return_dict=True)
    assert np.isfinite(good["loss"]) and np.isfinite(good["perplexity"])
