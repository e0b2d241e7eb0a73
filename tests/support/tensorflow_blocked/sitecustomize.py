"""Makes TensorFlow unimportable in every interpreter started with this folder first on
PYTHONPATH (Python imports `sitecustomize` at startup): `import tensorflow` then raises
ImportError, as on a machine where it is not installed. Child processes inherit PYTHONPATH,
so a trainer's subprocesses are blocked too. Used through `tests.support.no_tensorflow`."""

import sys

for _name in ("tensorflow", "tensorflow_text", "tf_keras"):
    sys.modules[_name] = None  # an import of a None entry raises ImportError
