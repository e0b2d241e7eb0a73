"""`python -m trainer.keras_hub_presets`: keras-hub presets this trainer can start from.

The code is in trainer/models/keras_hub_presets.py. Run as a command, this
launcher chooses the Keras backend first (trainer/startup/launch.py); `main` is the command
called from Python.
"""


def main(argv=None) -> int:
    """The command from Python (on the backend Keras was imported with)."""
    from trainer.models.keras_hub_presets import main as command

    return command(argv)


if __name__ == "__main__":
    from trainer.startup import launch

    launch.run("trainer.models.keras_hub_presets")
