"""The TensorFlow blocker really blocks, in the process it starts and in that process's children."""

import subprocess
import sys

from tests.support import no_tensorflow

_CHILD = (
    "import subprocess, sys\n"
    "code = 'try:\\n import tensorflow\\nexcept ImportError: print(1)'\n"
    "print(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True).stdout)"
)


def test_tensorflow_is_unimportable_in_a_process_and_its_children():
    result = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env=no_tensorflow.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.split() == ["1"]


_PROBES = """
import importlib.metadata, importlib.util, sys
import numpy  # everything else still imports
try:
    importlib.metadata.version("tensorflow")
    print("metadata seen")
except importlib.metadata.PackageNotFoundError:
    print("no metadata")
print(importlib.util.find_spec("tensorflow"), "tensorflow" in sys.modules)
"""


def test_probes_see_tensorflow_absent_rather_than_failing():
    # torch._dynamo asks find_spec("tensorflow") at import, Keras asks sys.modules: both must
    # see a machine without it (no exception, no module entry, no metadata).
    result = subprocess.run(
        [sys.executable, "-c", _PROBES],
        env=no_tensorflow.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.split("\n")[:2] == ["no metadata", "None False"]
