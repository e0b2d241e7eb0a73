"""`python -m trainer.task`: pretrain a masked-language model.

The code is in trainer/pretraining/task.py.
Run as a command, it chooses the Keras backend before Keras is imported
(trainer/startup/launch.py); `main` is the command called from Python.
"""

from trainer.startup import launch

main = launch.command("trainer.pretraining.task")

if __name__ == "__main__":
    launch.run(main.module)
