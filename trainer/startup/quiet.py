"""Keeps TensorFlow's known-harmless start-up lines off the terminal of a machine with no GPU.

The tensorflow 2.21 wheel is built with CUDA. On a machine without an NVIDIA GPU, importing it
and its first device query print `Could not find cuda drivers`, `cpu_feature_guard ... rebuild
TensorFlow` and `E0000 ... failed call to cuInit: ... CUDA error` (and, at the model build,
`E0000 ... oneDNN supports DT_INT64 only on platforms with AVX-512`) through absl logging, which
TF_CPP_MIN_LOG_LEVEL no longer silences. A user reads the `E` line as a failure. So, where no
GPU is present and none was asked for, the import and the GPU query run with file descriptor 2
pointed at a temporary file, and every line that is not one of those known ones is passed on.
With a GPU present (or CUDA_VISIBLE_DEVICES set) nothing is hidden: there a cuInit failure is
real news.

Example:
    >>> from trainer.startup import quiet
    >>> quiet.import_tensorflow()  # then `import tensorflow as tf` as usual
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import sys
import tempfile

HARMLESS = re.compile(
    "|".join(
        [
            r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
            r"cudart_stub\.cc.*Could not find cuda drivers on your machine",
            r"cuda_platform\.cc.*failed call to cuInit",
            r"cpu_feature_guard\.cc.*optimized to use available CPU instructions",
            r"^To enable the following instructions: .* rebuild TensorFlow",
            r"oneDNN custom operations are on",
            r"Unable to register cu(DNN|FFT|BLAS) factory",
            r"TF-TRT Warning: Could not find TensorRT",
            r"util\.cc.*oneDNN supports DT_INT64 only on platforms with AVX-512",
        ]
    )
)


def gpu_expected() -> bool:
    """True on a machine with an NVIDIA device, or when the user named GPUs to use."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return bool(glob.glob("/dev/nvidia[0-9]*")) or visible not in (None, "", "-1")


def import_tensorflow() -> None:
    """Imports TensorFlow (and runs its GPU query), hiding only the lines in HARMLESS."""
    if "tensorflow" in sys.modules or gpu_expected():
        return
    with harmless_lines_hidden():
        import tensorflow as tf

        if tf.test.is_built_with_cuda():  # the cuInit line comes with the first query
            tf.config.list_physical_devices("GPU")


@contextlib.contextmanager
def harmless_lines_hidden():
    """Within the block, file descriptor 2 goes to a temporary file; afterwards every line
    not in HARMLESS is written to the real stderr. Does nothing where a GPU is expected.

    The trainer wraps its eager model build in it too: oneDNN logs once per process, as an
    `E` line, that it leaves int64 ops to Eigen (Keras transposes int64 tensors there).
    """
    if gpu_expected():
        yield
        return
    with tempfile.TemporaryFile() as capture:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines = capture.read().decode(errors="replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if not HARMLESS.search(line))
            if kept:
                os.write(2, kept.encode())


class _GrainReadAheadNote(logging.Filter):
    """keras-hub's TextClassifier.fit reads its batches through grain with an 8-batch
    read-ahead (`keras_hub/src/utils/pipeline_model.py`), and grain logs, each epoch, that 8 is
    fewer than its default 16 reading threads. Harmless for the in-memory arrays of a
    fine-tune; shown to users it reads as a fault of ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("prefetch_buffer_size=" in message and "smaller than num_threads" in message)


def hide_grain_read_ahead_note() -> None:
    """Drops only that note from absl's logger (where grain logs); idempotent."""
    logger = logging.getLogger("absl")
    if not any(isinstance(f, _GrainReadAheadNote) for f in logger.filters):
        logger.addFilter(_GrainReadAheadNote())
