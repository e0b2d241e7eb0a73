"""`python -m tests.trainer.no_tensorflow_flow ROOT`: the JAX trainer's flow in one process,
meant to run where TensorFlow cannot be imported (tests.support.no_tensorflow): tiny shards
and a tokenizer written without TensorFlow; a run stopped after its backup at step 4 (as a
preemption stops it between two intervals) and the same command again, resuming to step 8;
the same run uninterrupted; its export in both formats, a prediction with the export and a
fine-tune of the run. Prints one JSON line for tests/trainer/startup/test_no_tensorflow.py: what was
imported, the seconds each part took.
"""

from __future__ import annotations

import json
import sys
import time

from tests.trainer import finetune_data, mlm_data

MODEL = '{"num_layers": 1, "num_heads": 2, "hidden_dim": 32, "intermediate_dim": 64}'
STEPS = ["--train_steps", "8", "--eval_every", "8", "--save_every", "4"]  # one evaluation


def corpus(root: str) -> dict:
    info = mlm_data.make_tokenizer(f"{root}/tokenizer", special_tokens_in_text=True)
    mlm_data.write_split(f"{root}/train", *mlm_data.repetitive_sequences(256, seed=0), info)
    mlm_data.write_split(
        f"{root}/eval",
        *mlm_data.repetitive_sequences(64, seed=1),
        info,
        num_shards=2,
        split="validation",
    )
    return {"train": f"{root}/train", "eval": f"{root}/eval", "tokenizer": f"{root}/tokenizer"}


def train_args(data: dict, output_dir: str) -> list[str]:
    """The run's flags: the full run and the killed-then-resumed one use the same."""
    args = mlm_data.task_args(data, output_dir, *STEPS, "--backend", "jax")
    args[args.index("--config") + 1] = MODEL
    return args


def main(root: str) -> dict:
    from trainer.finetuning import finetune
    from trainer.pretraining import task
    from trainer.release import export, predict

    data = corpus(root)
    seconds, start = {}, time.perf_counter()

    def lap(name):
        nonlocal start
        seconds[name], start = round(time.perf_counter() - start, 1), time.perf_counter()

    try:
        task.run(
            task.parse_args(train_args(data, f"{root}/resumed")),
            extra_callbacks=[mlm_data.preempt_at(4)],
        )
        raise AssertionError("the run was not stopped at step 4")
    except mlm_data.Preempted:
        pass
    assert task.main(train_args(data, f"{root}/resumed")) == 0  # the same command again
    lap("stop_and_resume")
    assert task.main(train_args(data, f"{root}/full")) == 0
    lap("train")
    assert (
        export.main(
            ["--checkpoint", f"{root}/full", "--output_dir", f"{root}/export", "--format", "all"]
        )
        == 0
    )
    assert (
        predict.main(["--model", f"{root}/export/keras-hub", "w1 w2 [MASK] w4", "--top_k", "2"])
        == 0
    )
    lap("export_predict")
    for split, seed, count in (("train", 0, 24), ("dev", 1, 8)):
        finetune_data.write(
            f"{root}/{split}.jsonl",
            finetune_data.examples(count, seed, pair=False, regression=False),
        )
    assert (
        finetune.main(
            [
                "--model",
                f"{root}/full",
                "--train",
                f"{root}/train.jsonl",
                "--dev",
                f"{root}/dev.jsonl",
                "--text_column",
                "sentence",
                "--output_dir",
                f"{root}/finetune",
                "--epochs",
                "1",
                "--seeds",
                "1",
                "--batch_size",
                "8",
                "--max_length",
                "16",
            ]
        )
        == 0
    )
    lap("finetune")
    return {
        "tensorflow_imported": "tensorflow" in sys.modules,
        "modules": sorted(m for m in sys.modules if m.split(".")[0] == "trainer"),
        "seconds": seconds,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
