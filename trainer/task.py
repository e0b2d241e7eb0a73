"""`python -m trainer.task`: pretrain a masked-language model.

The code is in trainer/pretraining/task.py. Run as a command, this
launcher chooses the Keras backend first (trainer/startup/launch.py); `main` is the command
called from Python.
"""


def main(argv=None) -> int:
    """The command from Python (on the backend Keras was imported with)."""
    from trainer.pretraining.task import main as command

    return command(argv)


if __name__ == "__main__":
    from trainer.startup import launch

    launch.run("trainer.pretraining.task")
