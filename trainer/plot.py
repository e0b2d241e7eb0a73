"""`python -m trainer.plot`: a run's curves as a PNG.

The code is in trainer/release/plot.py.
Run as a command, it chooses the Keras backend before Keras is imported
(trainer/startup/launch.py); `main` is the command called from Python.
"""

from trainer.startup import launch

main = launch.command("trainer.release.plot")

if __name__ == "__main__":
    launch.run(main.module)
