"""`python -m trainer.finetune`: fine-tune and score a model downstream.

The code is in trainer/finetuning/finetune.py.
Run as a command, it chooses the Keras backend before Keras is imported
(trainer/startup/launch.py); `main` is the command called from Python.
"""

from trainer.startup import launch

main = launch.command("trainer.finetuning.finetune")

if __name__ == "__main__":
    launch.run(main.module)
