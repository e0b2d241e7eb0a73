"""TensorBoard scalar logs written without TensorFlow (the JAX stacks have none).

An event file is a TFRecord file of `Event` protocol buffers: a first event naming the
format, then one event per step holding its scalars. The protos are the `tensorboard`
package's own (`tensorboard.compat.proto`, plain protobuf, no TensorFlow), the framing is
common/tfrecord.py. The tensorboard package's own writer (`tensorboard.summary.Writer`) is not
used: it writes through `tensorboard.compat.tf`, which is TensorFlow itself wherever
TensorFlow is installed (so a JAX run would import it) and, without it, a stub with no gs://.

A local file is appended to (a running TensorBoard reads on from where it stopped); an object
store cannot append, so there the whole file is uploaded again at each write, as TensorFlow's
own GCS writer does at each flush. Without the tensorboard package no logs are written and one
line says so.

Example:
    >>> log = EventLog("runs/x/logs/train")
    >>> log.write(100, {"loss": 2.5, "learning_rate": 1e-3})
"""

from __future__ import annotations

import itertools
import os
import socket
import time

from common import fs, tfrecord

_MISSING = (
    "TensorBoard logs are not written: the tensorboard package is not installed "
    "(pip install tensorboard)."
)
_said_missing = False
_counter = itertools.count()  # two logs of one process in one second get distinct names


def _protos():
    """tensorboard's protobuf modules, or None where the package is missing (said once)."""
    global _said_missing
    try:
        from tensorboard.compat.proto import (
            event_pb2,
            summary_pb2,
            tensor_pb2,
            tensor_shape_pb2,
            types_pb2,
        )
    except ImportError:
        if not _said_missing:
            print(_MISSING)
            _said_missing = True
        return None
    return event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2


def scalar_event(protos, step: int, scalars: dict, wall_time: float):
    """One Event with each scalar as tf.summary.scalar (TF 2) writes it: a float tensor of
    shape [] tagged for TensorBoard's scalars plugin."""
    event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2 = protos
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
        data_class=summary_pb2.DATA_CLASS_SCALAR,
    )
    event = event_pb2.Event(wall_time=wall_time, step=int(step))
    for tag, value in scalars.items():
        event.summary.value.add(
            tag=tag,
            metadata=metadata,
            tensor=tensor_pb2.TensorProto(
                dtype=types_pb2.DT_FLOAT,
                tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                float_val=[float(value)],
            ),
        )
    return event


class EventLog:
    """One event file in `folder`, created at the first `write`."""

    def __init__(self, folder: str):
        self.folder = folder
        self.path = None
        self._written = b""  # an object store's file so far (uploaded whole at each write)
        self._protos = _protos()

    def write(self, step: int, scalars: dict) -> None:
        """Adds the scalars of `step` and makes them readable (written through, no buffer)."""
        if self._protos is None or not scalars:
            return
        now = time.time()
        records = [scalar_event(self._protos, step, scalars, now).SerializeToString()]
        if self.path is None:
            self.path = fs.join(
                self.folder,
                f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}.{os.getpid()}"
                f".{next(_counter)}.v2",
            )
            first = self._protos[0].Event(wall_time=now, file_version="brain.Event:2")
            records.insert(0, first.SerializeToString())
        data = tfrecord.frame(records)
        if fs.is_remote(self.path):
            self._written += data
            fs.write_bytes(self.path, self._written)
            return
        os.makedirs(self.folder, exist_ok=True)
        with open(self.path, "ab") as f:
            f.write(data)
