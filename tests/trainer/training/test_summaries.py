"""TensorBoard logs without TensorFlow (trainer/training/summaries.py): TensorBoard's own reader
sees every scalar at its step, locally and on gs://; without the tensorboard package, one line."""

import sys

import numpy as np
import pytest

from common import fs, tfrecord
from trainer.training import summaries


@pytest.fixture(params=["local", "gcs"])
def folder(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "logs" / "train")
    gcs = request.getfixturevalue("gcs")
    gcs.apply_env()
    return gcs.url("logs", "train")


def _events(path):
    from tensorboard.compat.proto import event_pb2

    with fs.open_read(path) as f:
        return [event_pb2.Event.FromString(r) for r in tfrecord.records(f)]


def test_tensorboard_reads_each_scalar_at_its_step(folder):
    log = summaries.EventLog(folder)
    log.write(10, {"loss": 2.5, "learning_rate": 1e-3})
    log.write(20, {"loss": 1.5, "learning_rate": 2e-3})
    files = fs.glob_in(folder, "events.out.tfevents.*")
    assert files == [log.path]  # one file, written through (no flush needed)
    events = _events(log.path)
    assert events[0].file_version == "brain.Event:2"
    if not fs.is_remote(folder):  # TensorBoard's own loader (local files)
        from tensorboard.backend.event_processing import event_accumulator
        from tensorboard.util import tensor_util

        reader = event_accumulator.EventAccumulator(folder)
        reader.Reload()
        loss = [
            (e.step, float(tensor_util.make_ndarray(e.tensor_proto)))
            for e in reader.Tensors("loss")
        ]
        assert loss == [(10, 2.5), (20, 1.5)]
    scalars = [
        (e.step, v.tag, v.tensor.float_val[0], v.metadata.plugin_data.plugin_name)
        for e in events[1:]
        for v in e.summary.value
    ]
    assert scalars[:2] == [
        (10, "loss", 2.5, "scalars"),
        (10, "learning_rate", np.float32(1e-3), "scalars"),
    ]
    assert [s[0] for s in scalars] == [10, 10, 20, 20]


def test_without_the_tensorboard_package_one_line_and_no_files(tmp_path, monkeypatch, capsys):
    for name in [n for n in sys.modules if n.split(".")[0] == "tensorboard"] + ["tensorboard"]:
        monkeypatch.setitem(sys.modules, name, None)  # `import tensorboard...` fails
    monkeypatch.setattr(summaries, "_said_missing", False)
    for kind in ("train", "validation"):
        summaries.EventLog(str(tmp_path / kind)).write(1, {"loss": 1.0})
    out = capsys.readouterr().out
    assert out.count("tensorboard package is not installed") == 1 and out.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
