"""`python -m trainer.predict`: a fine-tuned model's predictions on new text.

The code is in trainer/release/predict.py. Run as a command, this
launcher chooses the Keras backend first (trainer/startup/launch.py); `main` is the command
called from Python.
"""


def main(argv=None) -> int:
    """The command from Python (on the backend Keras was imported with)."""
    from trainer.release.predict import main as command

    return command(argv)


if __name__ == "__main__":
    from trainer.startup import launch

    launch.run("trainer.release.predict")
