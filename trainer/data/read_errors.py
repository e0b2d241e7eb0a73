"""What a failed read of a split means, said in one line: the split was replaced under the
run, a record is not what the schema promises, or a shard its manifest lists is gone.
Both input pipelines' errors alike (`replaced_splits_named`)."""

from __future__ import annotations

import contextlib
import sys

from common import fs, schema, shards, tfrecord
from trainer.data.splits import DataError, SplitSource, digest_now


class SplitReplacedError(DataError):
    """A split folder changed under a running trainer (a prepare rerun into the same folder
    commits new shards and deletes the ones this run was reading)."""


class UnparsableRecordError(DataError):
    """A record that is not the schema's fixed-length Example, or not a whole TFRecord (a
    checksum that does not match): data that lies."""


class MissingShardError(DataError):
    """A shard the split's manifest lists is gone, while the manifest is the same."""


def _read_errors() -> tuple:
    """What reading a split raises: the TF-free readers' errors, and TensorFlow's when the
    tf.data pipeline may have run (TensorFlow is then imported; never imported here)."""
    errors = (OSError, tfrecord.RecordError, schema.RecordSchemaError)
    tf = sys.modules.get("tensorflow")
    return errors + (tf.errors.OpError,) if tf is not None and hasattr(tf, "errors") else errors


def _missing_shards(sources) -> list[str]:
    """Shards the sources list that are no longer in their folders (one listing each)."""
    gone = []
    for source in sources:
        present = set(fs.glob_in(source.split_dir, "*" + shards.SHARD_SUFFIX))
        gone += [path for path in source.files if path not in present]
    return gone


def _unparsable_reason(err: BaseException) -> str | None:
    """The first line of an error that says a record is not what the schema promises."""
    message = getattr(err, "message", None) or str(err)
    first = message.strip().splitlines()[0] if message.strip() else type(err).__name__
    tf = sys.modules.get("tensorflow")
    if isinstance(err, (tfrecord.RecordError, schema.RecordSchemaError)):
        return first
    if tf is not None and isinstance(err, tf.errors.DataLossError):
        return first  # TensorFlow's "corrupted record" (a checksum)
    if tf is not None and isinstance(err, tf.errors.InvalidArgumentError) and "Example" in message:
        return first
    return None


@contextlib.contextmanager
def replaced_splits_named(*sources: SplitSource):
    """Turns a read error caused by a split that changed since the run resolved it (a
    prepare rerun into the folder deleted the shards being read) into one
    `SplitReplacedError`, a record that does not parse or fails its checksum into one
    `UnparsableRecordError`, and a shard gone from an unchanged split into one
    `MissingShardError`; every other error passes unchanged. Both pipelines' errors alike."""
    try:
        yield
    except _read_errors() as err:
        for source in sources:
            if digest_now(source) != source.digest:
                raise SplitReplacedError(
                    f"{source.split_dir} changed while this run was reading it (a prepare run "
                    "committed other shards there and deleted the ones being read). Prepare "
                    "new data into a new folder; to go on, restore the old data there (a "
                    "restart with other data is refused)."
                ) from err
        names = " or ".join(s.split_dir for s in sources)
        reason = _unparsable_reason(err)
        if reason is not None:
            raise UnparsableRecordError(
                f"a record of {names} is not an Example of {sources[0].max_length} input_ids "
                f"and attention_mask ({reason}); python -m common.verify names the "
                "shard."
            ) from None
        gone = _missing_shards(sources)
        if gone:
            raise MissingShardError(
                f"{gone[0]} is gone although its split's manifest still lists it; restore it, "
                "or prepare the data again into a new folder."
            ) from None
        raise
