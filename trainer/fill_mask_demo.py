"""`python -m trainer.fill_mask_demo`: a pretrained model filling masked words.

The code is in trainer/release/fill_mask_demo.py.
Run as a command, it chooses the Keras backend before Keras is imported
(trainer/startup/launch.py); `main` is the command called from Python.
"""

from trainer.startup import launch

main = launch.command("trainer.release.fill_mask_demo")

if __name__ == "__main__":
    launch.run(main.module)
