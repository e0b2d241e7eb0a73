"""Split validation (manifest and legacy format) and the deterministic, resumable tf.data input."""

import os

import numpy as np
import pytest
import tensorflow as tf

from common.manifest import ManifestError
from tests.trainer.mlm_data import make_tokenizer, repetitive_sequences, write_split
from trainer.data import read_errors
from trainer.data import splits as data


@pytest.fixture(scope="module")
def info(tmp_path_factory):
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _unique_rows(num=200):
    """Rows made distinct by their first two words, so rows identify examples."""
    ids, mask = repetitive_sequences(num, seed=3)
    ids[:, 1], ids[:, 2] = 5 + np.arange(num) % 95, 5 + np.arange(num) // 95
    return ids, mask


@pytest.fixture(scope="module")
def split(tmp_path_factory, info):
    path = str(tmp_path_factory.mktemp("split"))
    write_split(path, *_unique_rows(), info, num_shards=4)
    return data.resolve_split(path, info)


def test_manifest_split_is_read(split):
    assert split.num_examples == 200 and split.max_length == 32 and len(split.files) == 4


@pytest.mark.parametrize(
    "problem, message",
    [
        ("uncommitted", "incomplete: it has no manifest.json"),
        ("length", "length 32, but 64"),
        ("tokenizer", "another tokenizer"),
        ("vocab", "vocabulary size"),
        ("empty", "no manifest.json and no"),
    ],
)
def test_bad_splits_are_refused_with_one_reason(tmp_path, info, problem, message):
    import dataclasses

    path = str(tmp_path / "split")
    ids, mask = repetitive_sequences(20, seed=0)
    tmp_path.joinpath("split").mkdir()
    if problem != "empty":
        write_split(path, ids, mask, info, num_shards=2, committed=problem != "uncommitted")
    asked = info
    if problem == "tokenizer":
        asked = dataclasses.replace(info, fingerprint="0" * 64)
    if problem == "vocab":
        asked = dataclasses.replace(info, vocab_size=123)
    with pytest.raises(ManifestError, match=message):
        data.resolve_split(path, asked, max_length=64 if problem == "length" else None)


def test_legacy_format_is_counted_from_names(tmp_path, info):
    ids, mask = repetitive_sequences(30, seed=0)
    write_split(str(tmp_path), ids, mask, info, num_shards=3, legacy_format=True)
    source = data.resolve_split(str(tmp_path), info)
    assert source.counts == (10, 10, 10) and source.max_length == 32
    assert [f.rsplit("/", 1)[1] for f in source.files][0] == "dataset-0-10.tfrecord"
    with pytest.raises(ManifestError, match="length 32, but 16"):
        data.resolve_split(str(tmp_path), info, max_length=16)
    small = info.__class__(info.fingerprint, 50, info.special_token_ids)
    with pytest.raises(ManifestError, match="outside the tokenizer's vocabulary"):
        data.resolve_split(str(tmp_path), small)


def _take(dataset, n):
    return [b["input_ids"].numpy() for b in dataset.take(n)]


@pytest.mark.parametrize("seed", [0, 2**31 - 1])
def test_seeds_that_tensorflow_truncates_to_zero_still_shuffle(split, seed):
    """keras.utils.set_random_seed(0) once made every tf.data shuffle of ours fail to trace
    (a symbolic seed used as a bool); the order is now numpy's (trainer/data/data_order.py), so
    seeds 0 and 2**31 - 1 shuffle like any other, with no TensorFlow seed involved."""
    import keras

    keras.utils.set_random_seed(seed)
    first = _take(data.train_dataset(split, 8, seed=seed, shuffle_buffer=64), 2)
    assert len(first) == 2 and (first[0] != first[1]).any()
    assert (
        _take(data.train_dataset(split, 8, seed=seed, shuffle_buffer=64), 2)[1] == first[1]
    ).all()  # still deterministic


def test_batches_are_parsed_int32_and_full(split):
    batch = next(iter(data.train_dataset(split, 8, seed=0)))
    assert batch["input_ids"].dtype == tf.int32 and batch["input_ids"].shape == (8, 32)
    assert set(np.unique(batch["attention_mask"].numpy())) <= {0, 1}


def test_order_is_deterministic_reshuffled_per_epoch_and_resumable(split):
    epoch_batches = 200 // 8  # 25
    run = _take(data.train_dataset(split, 8, seed=5, shuffle_buffer=64), 60)
    again = _take(data.train_dataset(split, 8, seed=5, shuffle_buffer=64), 60)
    other = _take(data.train_dataset(split, 8, seed=6, shuffle_buffer=64), 1)
    assert all((a == b).all() for a, b in zip(run, again))
    assert not (run[0] == other[0]).all()
    # Every example once per epoch, a new order the next epoch.
    first_epoch = np.concatenate(run[:epoch_batches])
    expected = _unique_rows()[0]
    assert sorted(map(tuple, first_epoch)) == sorted(map(tuple, expected))
    assert not (run[0] == run[epoch_batches]).all()
    # Resuming at step 37 yields exactly what the uninterrupted stream had there.
    resumed = _take(data.train_dataset(split, 8, seed=5, start_step=37, shuffle_buffer=64), 23)
    assert all((a == b).all() for a, b in zip(run[37:], resumed))


def test_each_input_pipeline_reads_only_its_files(split):
    seen = []
    for pipeline in range(2):
        dataset = data.train_dataset_fn(split, 4, seed=0)(data.PipelineShare(pipeline, 2))
        seen.append({tuple(r) for b in _take(dataset, 25) for r in b})
    # Two shards of 50 rows each per pipeline: each reads its 100 rows, none of the other's.
    assert len(seen[0]) == len(seen[1]) == 100 and not seen[0] & seen[1]


def test_eval_is_one_fixed_pass(split):
    one = _take(data.eval_dataset(split, 16), 100)
    two = _take(data.eval_dataset(split, 16), 100)
    assert len(one) == 200 // 16 and all((a == b).all() for a, b in zip(one, two))
    assert len(_take(data.eval_dataset(split, 16, max_batches=3), 100)) == 3


def test_hosts_share_a_split_with_fewer_files_than_hosts(split):
    """4 files, 8 hosts (a pod with a one-shard validation split is the usual case):
    each host keeps every 8th record of the common file order; shares are disjoint."""
    train, evals = [], []
    for pipeline in range(8):
        context = data.PipelineShare(pipeline, 8)
        first_epoch = _take(data.train_dataset_fn(split, 5, seed=0)(context), 5)
        train.append({tuple(r) for b in first_epoch for r in b})
        evals.append(_take(data.eval_dataset_fn(split, 4)(context), 100))
    assert all(len(rows) == 25 for rows in train)  # 200 rows / 8 hosts, one epoch each
    assert len(set().union(*train)) == 200  # disjoint and complete
    assert {len(e) for e in evals} == {6}  # 200 // 8 = 25 rows -> 6 batches of 4 on every host
    eval_rows = [tuple(r) for e in evals for b in e for r in b]
    assert len(eval_rows) == len(set(eval_rows)) == 8 * 6 * 4


def test_two_local_replicas_see_the_examples_one_replica_sees(split):
    """200 examples: 12 steps of 16 per data epoch on one replica or on two of 8 (the 8 left
    over are not a 25th batch of 8 for the pair), so a resume may change the replica count."""
    one = _take(data.train_dataset(split, 16, seed=5, start_step=7, shuffle_buffer=64), 20)
    two = _take(
        data.train_dataset(
            split,
            8,
            seed=5,
            start_step=7,
            shuffle_buffer=64,
            share=data.PipelineShare(batches_per_step=2),
        ),
        40,
    )
    for step in range(20):  # across the epoch boundary at step 12
        assert (one[step] == np.concatenate(two[2 * step : 2 * step + 2])).all(), step


def test_training_batches_carry_their_step_and_global_rows(split):
    """The masking keys (trainer/data/masking.py): the same example has the same (step, row)
    whether one replica takes 16 rows, two take 8, or the second of two hosts its 8."""
    one = list(data.train_dataset(split, 16, seed=5, start_step=7).take(2))
    assert [set(b[data.STEP].numpy()) for b in one] == [{7}, {8}]
    np.testing.assert_array_equal(one[0][data.ROW].numpy(), np.arange(16))
    two = list(
        data.train_dataset(split, 8, seed=5, start_step=7, share=data.PipelineShare(0, 1, 2)).take(
            4
        )
    )
    assert [int(b[data.STEP][0]) for b in two] == [7, 7, 8, 8]
    np.testing.assert_array_equal(two[1][data.ROW].numpy(), np.arange(8, 16))
    host = next(iter(data.train_dataset(split, 8, seed=5, share=data.PipelineShare(1, 2))))
    np.testing.assert_array_equal(host[data.ROW].numpy(), np.arange(8, 16))


def test_micro_batches_of_a_step_are_the_big_batch_of_that_step(split):
    """Gradient accumulation: 4 micro-batches of 4 per step hold the rows, steps and global
    row numbers of one batch of 16 (also across the epoch boundary at step 12), so the masks
    and the update match; so do two replicas taking 4 micro-batches of 2 each."""
    one = list(data.train_dataset(split, 16, seed=5, start_step=7, shuffle_buffer=64).take(8))
    micro = list(
        data.train_dataset(split, 4, seed=5, start_step=7, shuffle_buffer=64, micro_batches=4).take(
            32
        )
    )
    for step, big in enumerate(one):
        parts = micro[4 * step : 4 * step + 4]
        for key in (data.STEP, data.ROW, "input_ids"):
            joined = np.concatenate([p[key].numpy() for p in parts])
            np.testing.assert_array_equal(joined, big[key].numpy(), err_msg=f"{key} {step}")
    two = list(
        data.train_dataset(
            split,
            2,
            seed=5,
            start_step=7,
            shuffle_buffer=64,
            share=data.PipelineShare(batches_per_step=2),
            micro_batches=4,
        ).take(64)
    )
    for step, big in enumerate(one):
        for key in (data.STEP, data.ROW, "input_ids"):
            joined = np.concatenate([b[key].numpy() for b in two[8 * step : 8 * step + 8]])
            np.testing.assert_array_equal(joined, big[key].numpy(), err_msg=f"{key} {step}")
    host = next(
        iter(data.train_dataset(split, 4, seed=5, share=data.PipelineShare(1, 2), micro_batches=2))
    )
    np.testing.assert_array_equal(host[data.ROW].numpy(), np.arange(8, 12))  # 2nd host


def _replace_split_at(step: int, split_dir: str, old_shards: list, info, keep_manifest=False):
    """A callback that, after update `step`, deletes the split's shards and (unless
    `keep_manifest`) commits other shards there, as a prepare rerun into the folder would."""
    import keras

    from trainer.models.checkpoints import update_count

    class Replace(keras.callbacks.Callback):
        done = False

        def on_train_batch_end(self, batch, logs=None):
            if update_count(self.model.optimizer) >= step and not self.done:
                self.done = True
                for path in old_shards:
                    os.remove(path)
                if not keep_manifest:
                    write_split(split_dir, *_unique_rows(48), info)

    return Replace()


@pytest.mark.slow
@pytest.mark.parametrize("keep_manifest", [False, True])
def test_a_split_replaced_under_a_running_trainer_is_named(tmp_path, keep_manifest):
    """docs/data-format.md: a prepare rerun into a folder deletes the shards a trainer
    reads; the trainer then stops with one line saying so. Shards gone without a new
    manifest are another problem, named as such in one line too."""
    from tests.trainer.mlm_data import task_args
    from trainer.pretraining import task

    corpus = {
        "tokenizer": str(tmp_path / "tok"),
        "train": str(tmp_path / "train"),
        "eval": str(tmp_path / "eval"),
    }
    info = make_tokenizer(tmp_path / "tok")
    old = write_split(corpus["train"], *_unique_rows(64), info)
    write_split(corpus["eval"], *_unique_rows(32), info, num_shards=1, split="validation")
    args = task_args(
        corpus,
        tmp_path / "run",
        "--train_steps",
        "40",
        "--eval_every",
        "40",
        "--save_every",
        "40",
        "--config",
        '{"num_layers": 1, "num_heads": 1, "hidden_dim": 16, "intermediate_dim": 16}',
    )
    replace = _replace_split_at(2, corpus["train"], old, info, keep_manifest)
    expected = read_errors.MissingShardError if keep_manifest else read_errors.SplitReplacedError
    with pytest.raises(expected) as caught:
        task.run(task.parse_args(args), extra_callbacks=[replace])
    message = str(caught.value)
    assert "\n" not in message
    if keep_manifest:
        assert message.startswith(f"{corpus['train']}/") and "is gone although" in message
    else:
        assert message.startswith(f"{corpus['train']} changed while this run was reading it")


@pytest.mark.parametrize("pipeline", [data.TF_DATA, data.GRAIN])
def test_records_shorter_than_the_manifest_length_are_one_line(tmp_path, info, pipeline):
    """A shard whose records lie about their length (manifest says 32): reading it in the
    trainer is one `DataError` line naming the split and common.verify, not a traceback."""
    ids, mask = repetitive_sequences(64, seed=4)
    write_split(str(tmp_path / "short"), ids[:, :28], mask[:, :28], info)
    manifest_path = tmp_path / "short" / "manifest.json"
    manifest_path.write_text(
        manifest_path.read_text().replace('"max_length": 28', '"max_length": 32')
    )
    source = data.resolve_split(str(tmp_path / "short"), info)
    with pytest.raises(read_errors.UnparsableRecordError) as caught:
        with read_errors.replaced_splits_named(source):
            next(iter(data.eval_dataset(source, 16, pipeline=pipeline)))
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"a record of {tmp_path / 'short'} ")
    assert "python -m common.verify" in message
