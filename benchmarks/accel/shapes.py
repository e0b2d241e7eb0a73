"""The families and size names the accelerator benchmark takes: what its parent process reads
its flags with. The parent imports nothing of the trainer (so that it never initialises a
device; on the GPU machine Keras is on the JAX child's path only), nor does the PyTorch child.

Each family's facts (its sizes, masking rate, vocabulary and model FLOPs per token) are its
record's (trainer/families/), read in the JAX child (`benchmarks.accel.ours.family_facts`),
which prints them first; the table and the PyTorch child take them from there.
"""

from __future__ import annotations

FAMILIES = ("roberta", "modernbert")  # --family's choices: those measured so far
DEFAULT = FAMILIES[0]  # --family's default, whose device command is the short one
# The size names of every family (tests/trainer/test_bench_accel.py checks them against the
# records): --configs names one.
SIZE_NAMES = ("tiny", "small", "base", "large")
