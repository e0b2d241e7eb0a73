"""Plots the training and evaluation curves of a run from its history.json.

python -m trainer.plot --run_dir runs/demo/train --output runs/demo/train/curves.png
"""

from __future__ import annotations

from common import flags, fs
from common.errors import UserError, run_cli
from trainer.run_folder.run_dir import RunDir


def plot(history: list[dict], output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no screen needed
    import matplotlib.pyplot as plt

    steps = [h["step"] for h in history]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    for key, label in (("loss", "train loss"), ("eval_loss", "eval loss")):
        points = [(h["step"], h[key]) for h in history if key in h]
        if points:
            ax_loss.plot(*zip(*points), marker="o", label=label)
    acc_keys = sorted({k for h in history for k in h if "accuracy" in k})
    for key in acc_keys:
        points = [(h["step"], h[key]) for h in history if key in h]
        ax_acc.plot(*zip(*points), marker="o", label=key.replace("_", " "))
    ax_loss.set(xlabel="step", ylabel="masked-LM loss", title="Loss")
    ax_acc.set(xlabel="step", ylabel="accuracy on masked tokens", title="Masked accuracy")
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    fig.suptitle(f"{len(steps)} intervals, last step {steps[-1] if steps else 0}")
    fig.tight_layout()
    with fs.open_write(output) as f:
        fig.savefig(f, format="png", dpi=100)


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run_dir", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)

    def body():
        path = RunDir(args.run_dir).history
        if not fs.exists(path):
            raise UserError(f"{path} does not exist: is {args.run_dir} a training output?")
        plot(fs.read_json(path), args.output)
        print(f"curves written to {args.output}")

    return run_cli(body, argv)
