"""The GPU-machine stand-in blocks what the machine lacks, and only that."""

import subprocess
import sys

from tests.support import gpu_image

_PROBE = (
    "import importlib\n"
    "for name in ('tensorflow', 'datasets', 'keras', 'grain', 'jax', 'apache_beam'):\n"
    "    try:\n"
    "        importlib.import_module(name)\n"
    "        print(name, 'yes')\n"
    "    except ImportError:\n"
    "        print(name, 'no')\n"
)


def test_only_the_images_and_the_carried_packages_import():
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=gpu_image.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = dict(line.split() for line in result.stdout.splitlines())
    # TensorFlow, datasets and Beam are not on the machine (nor carried); keras and grain are.
    assert found == {
        "tensorflow": "no",
        "datasets": "no",
        "keras": "yes",
        "grain": "yes",
        "jax": "yes",
        "apache_beam": "no",
    }
