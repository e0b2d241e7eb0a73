from common import prepared_dir, shards


def test_names_follow_the_layout_and_the_legacy_regex():
    run_id = shards.new_run_id()
    assert shards.parse_shard_name(f"x-{run_id}-00000-1.tfrecord") == ("x", 0, 1)
    path = prepared_dir.shard_path(
        "gs://b/out", "train", shards.shard_name("train", 7, 1234, run_id)
    )
    assert path == f"gs://b/out/train/train-{run_id}-00007-1234.tfrecord"
    assert shards.parse_shard_name(path) == ("train", 7, 1234)
    assert shards.count_from_name(path) == 1234
    # Names without a run id (earlier versions) and the legacy example's own names.
    assert shards.parse_shard_name("my-split-00002-5.tfrecord") == ("my-split", 2, 5)
    assert shards.count_from_name("out/train/dataset-3-1000.tfrecord") == 1000
    assert shards.parse_shard_name("notes.txt") is None


def test_shard_basenames_from_a_manifest():
    good = shards.shard_name("train", 3, 10, "r20261122120000a1b2c3")
    assert shards.is_shard_basename(good) and shards.is_shard_basename(good, "train")
    assert not shards.is_shard_basename(good, "validation")
    for bad in ("../" + good, "/abs/" + good, "x/" + good, good + "/", "notes.txt", 7, None):
        assert not shards.is_shard_basename(bad)
    assert shards.is_run_id("r20261122120000a1b2c3") and not shards.is_run_id("../../x")
