"""`python -m trainer.export`: export a run to Keras, keras-hub and transformers formats.

The code is in trainer/release/export.py.
Run as a command, it chooses the Keras backend before Keras is imported
(trainer/startup/launch.py); `main` is the command called from Python.
"""

from trainer.startup import launch

main = launch.command("trainer.release.export")

if __name__ == "__main__":
    launch.run(main.module)
