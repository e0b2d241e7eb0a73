"""`python -m trainer.baseline`: the unigram baseline beside a run's masked accuracy.

The code is in trainer/release/baseline.py.
Run as a command, it chooses the Keras backend before Keras is imported
(trainer/startup/launch.py); `main` is the command called from Python.
"""

from trainer.startup import launch

main = launch.command("trainer.release.baseline")

if __name__ == "__main__":
    launch.run(main.module)
