"""`python -m trainer.predict`: a fine-tuned model's predictions on new text.

The code is in trainer/release/predict.py.
Run as a command, it chooses the Keras backend before Keras is imported
(trainer/startup/launch.py); `main` is the command called from Python.
"""

from trainer.startup import launch

main = launch.command("trainer.release.predict")

if __name__ == "__main__":
    launch.run(main.module)
