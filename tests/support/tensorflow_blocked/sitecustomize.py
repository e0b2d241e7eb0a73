"""Makes TensorFlow unimportable in every interpreter started with this folder first on
PYTHONPATH (Python imports `sitecustomize` at startup): `import tensorflow` then raises
ModuleNotFoundError and "tensorflow" stays out of `sys.modules`, as on a machine where it is
not installed (a `None` entry in sys.modules would also raise, but code asking
`"tensorflow" in sys.modules` would then wrongly see it as imported). Child processes
inherit PYTHONPATH, so a trainer's subprocesses are blocked too. Used through
`tests.support.no_tensorflow`."""

import sys

_BLOCKED = ("tensorflow", "tensorflow_text", "tf_keras")


class _Blocker:
    """A finder ahead of all others that refuses the blocked packages and their modules."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(
                f"No module named {name!r} (blocked by tests/support/tensorflow_blocked)", name=name
            )
        return None


sys.meta_path.insert(0, _Blocker())
