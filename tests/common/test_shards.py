from common import shards


def test_names_follow_the_layout_and_the_seed_regex():
    path = shards.shard_path("gs://b/out", "train", 7, 1234)
    assert path == "gs://b/out/train/train-00007-1234.tfrecord"
    assert shards.parse_shard_name(path) == ("train", 7, 1234)
    assert shards.count_from_name(path) == 1234
    # The seed's own names (dataset-{shard}-{records}.tfrecord) count the same way.
    assert shards.count_from_name("out/train/dataset-3-1000.tfrecord") == 1000
    assert shards.parse_shard_name("notes.txt") is None
