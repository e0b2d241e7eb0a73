"""`python -m trainer.finetune`: fine-tune and score a model downstream.

The code is in trainer/finetuning/finetune.py. Run as a command, this
launcher chooses the Keras backend first (trainer/startup/launch.py); `main` is the command
called from Python.
"""


def main(argv=None) -> int:
    """The command from Python (on the backend Keras was imported with)."""
    from trainer.finetuning.finetune import main as command

    return command(argv)


if __name__ == "__main__":
    from trainer.startup import launch

    launch.run("trainer.finetuning.finetune")
