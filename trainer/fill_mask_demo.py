"""`python -m trainer.fill_mask_demo`: a pretrained model filling masked words.

The code is in trainer/release/fill_mask_demo.py. Run as a command, this
launcher chooses the Keras backend first (trainer/startup/launch.py); `main` is the command
called from Python.
"""


def main(argv=None) -> int:
    """The command from Python (on the backend Keras was imported with)."""
    from trainer.release.fill_mask_demo import main as command

    return command(argv)


if __name__ == "__main__":
    from trainer.startup import launch

    launch.run("trainer.release.fill_mask_demo")
