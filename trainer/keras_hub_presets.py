"""`python -m trainer.keras_hub_presets`: keras-hub presets this trainer can start from.

The code is in trainer/models/keras_hub_presets.py.
Run as a command, it chooses the Keras backend before Keras is imported
(trainer/startup/launch.py); `main` is the command called from Python.
"""

from trainer.startup import launch

main = launch.command("trainer.models.keras_hub_presets")

if __name__ == "__main__":
    launch.run(main.module)
