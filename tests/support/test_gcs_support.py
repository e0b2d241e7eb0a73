"""Self-test of the offline gs:// harness: Beam, TensorFlow and Keras against the emulator.

Each client runs in a fresh subprocess with `gcs.env`, exactly as the product's command lines
will be run by other tests: the variables must work when read at process start-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest_plugins = ["tests.support.gcs"]

REPO_ROOT = Path(__file__).resolve().parents[2]

# Time allowed for the gs:// operations of one script, imports excluded. Normal runs take well
# under a second; the budget is there to catch a client falling back to its slow paths (Beam's
# ~22 s google.auth.default() retries, TF's retry backoff) on a busy machine.
OPERATIONS_BUDGET_S = 15.0


def run_python(gcs, name: str, code: str, timeout: float = 120) -> str:
    """Runs `code` in a fresh interpreter with gcs.env; returns stdout, fails with its tail.

    The script must print ``OPS_SECONDS=<float>`` (time spent on gs:// operations).
    """
    env = {**os.environ, **gcs.env, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}
    started = time.monotonic()
    try:
        result = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"{name}: no result after {timeout} s\n{_tails(error.stdout, error.stderr)}")
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        pytest.fail(
            f"{name}: exit status {result.returncode}\n{_tails(result.stdout, result.stderr)}"
        )
    ops = float(result.stdout.rpartition("OPS_SECONDS=")[2].split()[0])
    print(f"[gcs-timing] {name}: process {elapsed:.1f} s, gs:// operations {ops:.2f} s")
    assert ops < OPERATIONS_BUDGET_S, (
        f"{name}: gs:// operations took {ops:.1f} s (auth retries or request retries?)\n"
        f"{_tails(result.stdout, result.stderr)}"
    )
    return result.stdout


def _tails(stdout, stderr, chars: int = 4000) -> str:
    def text(stream):
        return stream.decode(errors="replace") if isinstance(stream, bytes) else (stream or "")

    return (
        f"--- stdout (tail) ---\n{text(stdout)[-chars:]}\n"
        f"--- stderr (tail) ---\n{text(stderr)[-chars:]}"
    )


BEAM_ROUNDTRIP = """
    import time
    from apache_beam.io.filesystems import FileSystems
    base = {base!r}
    t = time.monotonic()
    with FileSystems.create(base + "a.txt") as f:
        f.write(b"hello from beam")
    with FileSystems.open(base + "a.txt") as f:
        assert f.read() == b"hello from beam"
    matched = [m.path for m in FileSystems.match([base + "*.txt"])[0].metadata_list]
    assert matched == [base + "a.txt"], matched
    FileSystems.rename([base + "a.txt"], [base + "b.txt"])
    assert not FileSystems.exists(base + "a.txt")
    assert FileSystems.exists(base + "b.txt")
    FileSystems.delete([base + "b.txt"])
    assert FileSystems.match([base + "*"])[0].metadata_list == []
    print(f"OPS_SECONDS={{time.monotonic() - t}}")
"""


def test_beam_filesystems(gcs):
    run_python(gcs, "beam FileSystems", BEAM_ROUNDTRIP.format(base=gcs.url("beam/")))


TF_GFILE_AND_TFRECORDS = """
    import time
    import tensorflow as tf
    base = {base!r}
    t = time.monotonic()
    tf.io.gfile.makedirs(base + "dir")
    assert tf.io.gfile.isdir(base + "dir")
    with tf.io.gfile.GFile(base + "dir/note.txt", "w") as f:
        f.write("hello from tf")
    with tf.io.gfile.GFile(base + "dir/note.txt") as f:
        assert f.read() == "hello from tf"
    records = [f"record-{{i}}".encode() * (i + 1) for i in range(50)]
    for shard in range(2):
        with tf.io.TFRecordWriter(base + f"dir/data-{{shard}}.tfrecord") as writer:
            for record in records[shard::2]:
                writer.write(record)
    files = sorted(tf.io.gfile.glob(base + "dir/*.tfrecord"))
    assert files == [base + "dir/data-0.tfrecord", base + "dir/data-1.tfrecord"], files
    read = [r.numpy() for r in tf.data.TFRecordDataset(files)]
    assert sorted(read) == sorted(records), read[:3]
    print(f"OPS_SECONDS={{time.monotonic() - t}}")
"""


@pytest.mark.slow
def test_tensorflow_gfile_and_tfrecords(gcs):
    run_python(gcs, "tensorflow gfile+tfrecords", TF_GFILE_AND_TFRECORDS.format(base=gcs.url()))


BEAM_WRITE = """
    import time
    from apache_beam.io.filesystems import FileSystems
    t = time.monotonic()
    with FileSystems.create({path!r}) as f:
        f.write(b"written by beam" * 1000)
    print(f"OPS_SECONDS={{time.monotonic() - t}}")
"""

TF_READ_THEN_WRITE = """
    import time
    import tensorflow as tf
    t = time.monotonic()
    with tf.io.gfile.GFile({source!r}, "rb") as f:
        assert f.read() == b"written by beam" * 1000
    with tf.io.TFRecordWriter({target!r}) as writer:
        for i in range(3):
            writer.write(b"written by tf %d" % i)
    print(f"OPS_SECONDS={{time.monotonic() - t}}")
"""

BEAM_READ_TFRECORDS = """
    import time
    import apache_beam as beam
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.testing.util import assert_that, equal_to
    t = time.monotonic()
    assert FileSystems.exists({path!r})
    with beam.Pipeline(runner="FnApiRunner") as p:
        records = p | beam.io.ReadFromTFRecord({path!r})
        assert_that(records, equal_to([b"written by tf %d" % i for i in range(3)]))
    print(f"OPS_SECONDS={{time.monotonic() - t}}")
"""


@pytest.mark.slow
def test_beam_and_tensorflow_read_each_other(gcs):
    beam_file, tf_file = gcs.url("interop", "beam.bin"), gcs.url("interop", "tf.tfrecord")
    run_python(gcs, "interop: beam writes", BEAM_WRITE.format(path=beam_file))
    run_python(
        gcs,
        "interop: tf reads beam, writes",
        TF_READ_THEN_WRITE.format(source=beam_file, target=tf_file),
    )
    run_python(gcs, "interop: beam reads tf", BEAM_READ_TFRECORDS.format(path=tf_file))


KERAS_SAVE_LOAD = """
    import time
    import numpy as np
    import keras
    import tensorflow as tf
    path = {path!r}
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    x = np.arange(8, dtype="float32").reshape(2, 4)
    t = time.monotonic()
    model.save(path)
    assert tf.io.gfile.exists(path)
    loaded = keras.models.load_model(path)
    ops = time.monotonic() - t
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    print(f"OPS_SECONDS={{ops}}")
"""


@pytest.mark.slow
def test_keras_save_and_load(gcs):
    run_python(gcs, "keras save/load", KERAS_SAVE_LOAD.format(path=gcs.url("model", "m.keras")))


def test_apply_env_in_process_and_wipe(gcs):
    """In-process Beam via apply_env(); wipe() empties the bucket but keeps it usable."""
    saved = os.environ.get("STORAGE_EMULATOR_HOST")
    from apache_beam.io.filesystems import FileSystems

    gcs.apply_env()
    assert os.environ["STORAGE_EMULATOR_HOST"] == gcs.endpoint
    with FileSystems.create(gcs.url("in-process.txt")) as f:
        f.write(b"x")
    assert FileSystems.exists(gcs.url("in-process.txt"))
    gcs.wipe()
    assert not FileSystems.exists(gcs.url("in-process.txt"))
    with FileSystems.create(gcs.url("again.txt")) as f:  # the bucket survived the wipe
        f.write(b"y")
    gcs.restore_env()
    assert os.environ.get("STORAGE_EMULATOR_HOST") == saved


def test_url():
    from tests.support.gcs import GcsEmulator

    with GcsEmulator(bucket="other-bucket") as emulator:
        assert emulator.url("a", "b.txt") == "gs://other-bucket/a/b.txt"
        assert emulator.url() == "gs://other-bucket/"
        assert emulator.bucket == "other-bucket"
