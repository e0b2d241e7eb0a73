"""Packed rows (trainer/finetuning/packed_rows.py, trainer/families/modernbert/packed.py): the
layout (first-fit decreasing, the row ladder, chunks apart), a tiny ModernBERT's vectors from
packed rows equal to the same texts padded one a row (mean and cls pooling, local layers, a
literal cls token inside a text), and the contrastive gradient of a packed batch equal to the
padded batch's. Runs on both backends (JAX compiles each check: ~20 s in all)."""

import functools

import keras
import numpy as np
import pytest

from trainer.families.modernbert import packed
from trainer.families.modernbert.backbone import ModernBertBackbone
from trainer.finetuning import contrastive, packed_rows
from trainer.models import packed_models
from trainer.release import embeddings

CLS, SEP, PAD = 2, 3, 0
SIZES = (16, 32)


def test_row_ladder_takes_two_steps_an_octave_times_the_devices():
    assert [packed_rows.row_ladder(n) for n in range(1, 14)] == [
        1, 2, 3, 4, 6, 6, 8, 8, 12, 12, 12, 12, 16,
    ]  # fmt: skip
    assert packed_rows.row_ladder(3, multiple=2) == 4
    assert packed_rows.row_ladder(5, multiple=4) == 8


def test_first_fit_places_the_longest_first_each_in_the_first_row_with_room():
    # lengths 9, 5, 7, 4 in rows of 16: 9 -> row 0; 7 -> row 0 (room 7); 5 -> row 1; 4 -> row 1
    assert packed_rows.first_fit([9, 5, 7, 4], 16) == [(0, 0), (1, 0), (0, 9), (1, 5)]


def _rows(rng, lengths, cls_inside=False):
    rows = [[CLS, *rng.integers(5, 60, n).tolist(), SEP] for n in lengths]
    if cls_inside:  # a text holding the cls token's string: read as that id
        rows[0][2] = CLS
    return rows


def test_a_packed_batch_keeps_every_token_and_says_where_each_example_starts():
    rows = _rows(np.random.default_rng(0), [1, 5, 9, 3, 12, 2, 7])
    batch = packed_rows.Packed(PAD, 16).features(rows)
    assert batch["token_ids"].shape == (4, 16)  # 53 tokens: 4 rows, not 7
    flat = batch["token_ids"].reshape(-1)
    for i, row in enumerate(rows):
        start = batch["example_starts"][i]
        assert flat[start : start + len(row)].tolist() == row
        assert (batch["example_ids"].reshape(-1) == i).sum() == len(row)
        assert batch["positions"].reshape(-1)[start : start + len(row)].tolist() == list(
            range(len(row))
        )
    assert batch["padding_mask"].sum() == sum(map(len, rows))


def test_chunks_are_packed_apart_into_as_many_rows_each():
    rows = _rows(np.random.default_rng(1), [14, 1, 1, 1, 3, 2])
    batch = packed_rows.Packed(PAD, 16).features(rows, chunk=3)
    assert batch["token_ids"].shape == (4, 16)  # chunk 1 needs 2 rows, chunk 2 one: 2 each
    # chunk 2 holds 3, 5, 4 tokens: longest first, counted inside its own rows
    assert batch["example_starts"].tolist()[3:] == [9, 0, 5]
    assert sorted(set(batch["example_ids"][2:].reshape(-1).tolist())) == [-1, 0, 1, 2]


def _compiled(fn):
    """JAX: jit-ed (op by op, each of the many small ops compiles apart: minutes); TensorFlow
    runs eagerly fast enough."""
    if keras.backend.backend() != "jax":
        return fn
    import jax

    return jax.jit(fn)


def _backbone():
    keras.utils.set_random_seed(0)
    return ModernBertBackbone(
        vocabulary_size=64, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
        local_window=4, global_attention_every=2, attention_path="portable",
    )  # fmt: skip


@pytest.mark.parametrize("how", ["mean", "cls"])
def test_packed_vectors_equal_the_texts_padded_one_a_row(how):
    backbone = _backbone()
    rows = _rows(np.random.default_rng(2), [1, 5, 9, 3, 12, 2, 7], cls_inside=True)
    padded = _compiled(embeddings.embedding_model(backbone, how))(
        packed_rows.Padded(PAD, SIZES).features(rows)
    )
    model = packed_models.PackedEmbedding(backbone, packed.packed_states, how)
    got = _compiled(model)(packed_rows.Packed(PAD, 16).features(rows))
    np.testing.assert_allclose(np.asarray(got), np.asarray(padded), atol=1e-6)


def _gradient(model, queries, documents, chunk):
    loss = functools.partial(contrastive.info_nce, temperature=0.05)

    def gradient(values, queries, documents):
        if chunk is None:
            return contrastive.batch_gradient(model, values, queries, documents, loss=loss)
        return contrastive.cached_gradient(model, values, queries, documents, chunk, loss=loss)

    return _compiled(gradient)(contrastive.current_values(model), queries, documents)


def test_the_packed_gradient_equals_the_padded_one():
    """The whole batch in one pass; packed chunks (gradient caching) are trained end to end in
    tests/trainer/finetuning/test_embedding_run.py."""
    chunk = None
    backbone = _backbone()
    rng = np.random.default_rng(3)
    queries, documents = _rows(rng, [2, 6, 1, 3]), _rows(rng, [9, 4, 13, 5])
    padded, packs = packed_rows.Padded(PAD, SIZES), packed_rows.Packed(PAD, 16)
    want = _gradient(
        embeddings.embedding_model(backbone, "mean"),
        padded.features(queries), padded.features(documents), None,
    )  # fmt: skip
    got = _gradient(
        packed_models.PackedEmbedding(backbone, packed.packed_states, "mean"),
        packs.features(queries, chunk), packs.features(documents, chunk), chunk,
    )  # fmt: skip
    assert float(got.loss) == pytest.approx(float(want.loss), abs=1e-5)
    for a, b in zip(got.gradients, want.gradients):
        a, b = np.asarray(a), np.asarray(b)
        assert float(np.abs(a - b).max()) <= 1e-5 * max(1.0, float(np.abs(b).max()))


def test_a_split_packs_once_into_fewer_rows_with_every_label_in_place():
    rows = _rows(np.random.default_rng(4), [3, 9, 1, 5, 2, 12, 4])
    padded = packed_rows.Padded(PAD, (16,)).features(rows)
    labels = np.where(padded["padding_mask"] == 1, np.arange(16)[None] % 3, -100)
    features, packed_labels = packed_rows.pack_split(padded, labels, PAD, -100, multiple=2)
    assert features["token_ids"].shape == (4, 16) and "example_starts" not in features
    assert (packed_labels != -100).sum() == (labels != -100).sum()
    for i, row in enumerate(rows):  # each sentence's tokens and labels side by side
        where = features["example_ids"] == i
        assert features["token_ids"][where].tolist() == row
        assert packed_labels[where].tolist() == labels[i, : len(row)].tolist()


def test_the_packed_tagger_gives_the_padded_taggers_logits():
    from types import SimpleNamespace

    from trainer import families
    from trainer.release import token_classification_export as exporter

    backbone = _backbone()
    source = SimpleNamespace(
        family=families.get("modernbert"), config=backbone.get_config(), from_scratch=True,
        weights=None,
    )  # fmt: skip
    ids = {"cls_token": CLS, "sep_token": SEP, "pad_token": PAD, "mask_token": 4}
    padded = exporter.tagger(source, 3, 1, ids)
    packs = exporter.packed_tagger(source, 3, 2, ids)
    packs.backbone.set_weights(padded.backbone.get_weights())
    for layer in packs.head:
        layer.set_weights(padded.get_layer(layer.name).get_weights())
    rows = _rows(np.random.default_rng(5), [3, 9, 1, 5, 2], cls_inside=True)
    features = packed_rows.Padded(PAD, (16,)).features(rows)
    want = np.asarray(_compiled(padded)(features))
    packed, _ = packed_rows.pack_split(features, np.zeros((5, 16), np.int32), PAD, -100)
    got = np.asarray(_compiled(packs)(packed))
    for i, row in enumerate(rows):
        mine = got[packed["example_ids"] == i]
        np.testing.assert_allclose(mine, want[i, : len(row)], atol=1e-5)


@pytest.mark.parametrize("how", ["cls", "mean"])
def test_the_packed_classifier_gives_each_pair_its_padded_logit_at_its_first_token(how):
    from trainer.families.modernbert.classifier import ModernBertTextClassifier
    from trainer.models import pooling

    classifier = ModernBertTextClassifier(_backbone(), 1)
    if how == "mean":
        classifier = pooling.mean_pooled(classifier)
    rows = _rows(np.random.default_rng(6), [3, 9, 1, 5, 2, 6])
    features = packed_rows.Padded(PAD, (16,)).features(rows)
    want = np.asarray(_compiled(classifier)(features))[:, 0]
    rows_in, targets = packed_rows.pack_example_targets(
        features, np.arange(6, dtype=np.float32), PAD, 16
    )
    model = packed_models.PackedClassifier(classifier, packed.packed_states, how)
    got = np.asarray(_compiled(model)(rows_in))[..., 0]
    firsts = targets[..., 1] == 1
    assert firsts.sum() == 6 and rows_in["token_ids"].shape[0] < 6
    np.testing.assert_allclose(got[firsts], want[targets[..., 0][firsts].astype(int)], atol=1e-5)
