"""How far above "no context" a run is: the unigram-frequency baseline of masked accuracy.

A model that ignores the context does best by always answering the most frequent token of
the training data. Masked positions are drawn uniformly from the non-special, non-pad
tokens, so that answer's expected masked accuracy is its share of those tokens in the
evaluation batches the run scores (the same records: each input pipeline's share, in batches
of one step's rows, capped at `max_eval_batches`; gradient accumulation plays no part).

    python -m trainer.baseline --run_dir RUN_DIR

prints, e.g.,
`eval masked accuracy 27.1 % vs 4.9 % for always answering '▁the' (unigram baseline): 5.5x`.
"""

from __future__ import annotations

import numpy as np

from common import flags, fs, schema, tokenizer_files
from common.errors import UserError, run_cli
from trainer.data import splits as data
from trainer.run_folder.run_dir import RunDir
from trainer.run_folder.run_record import RunRecord


def token_counts(batches, vocab_size: int, special_ids) -> np.ndarray:
    """Counts of every non-special, non-pad token id over `batches` of parsed records."""
    counts = np.zeros(vocab_size, np.int64)
    for batch in batches:
        ids = np.asarray(batch[schema.INPUT_IDS])[np.asarray(batch[schema.ATTENTION_MASK]) > 0]
        counts += np.bincount(ids, minlength=vocab_size)[:vocab_size]
    counts[list(special_ids)] = 0
    return counts


def scored_batches(evaluation: data.SplitSource, record: RunRecord):
    """The evaluation batches a run (`record`: its run_config.json) scores, as
    `trainer.task` builds them: per input pipeline, its share of the records in batches of
    the rows one step gives it (per-replica batch x its replicas, whichever backend), capped
    at `max_eval_batches`. Not the global batch, which counts accumulated micro-batches."""
    recipe = record.recipe
    pipelines = int(record.input_pipelines or 1)
    per_replica = recipe.per_replica_batch_size
    rows = (
        per_replica * int(recipe.replicas or 1) // pipelines
        if per_replica
        else recipe.global_batch_size
    )  # run configs older than these fields
    for pipeline in range(pipelines):
        mine = evaluation.for_pipeline(pipeline, pipelines, by_records=True)
        yield from data.eval_dataset(
            mine, rows, record.max_eval_batches, pipeline=data.GRAIN
        )  # the same batches, no TensorFlow


def unigram_baseline(run_dir: str, train_batches: int = 200) -> tuple[int, float]:
    """(the most frequent training token, its share of the run's evaluation tokens)."""
    run = RunDir(run_dir)
    if not fs.exists(run.run_config):
        raise UserError(f"{run_dir} holds no run_config.json; point --run_dir at a run")
    record = RunRecord.read(run.run_config)
    if not (record.train_data and record.eval_data):
        raise UserError(f"{run.run_config} names no training or evaluation data to count")
    _, info = tokenizer_files.load(run.tokenizer_dir)
    train = data.resolve_split(record.train_data, info, record.max_length)
    evaluation = data.resolve_split(record.eval_data, info, record.max_length)
    batch = record.recipe.global_batch_size
    specials = info.all_special_ids
    top = int(
        np.argmax(
            token_counts(
                data.eval_dataset(train, batch, train_batches, pipeline=data.GRAIN),
                info.vocab_size,
                specials,
            )
        )
    )
    scored = token_counts(scored_batches(evaluation, record), info.vocab_size, specials)
    return top, float(scored[top] / max(1, scored.sum()))


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run_dir", required=True, help="a training run's output folder")
    args = parser.parse_args(argv)

    def body():
        run = RunDir(args.run_dir)
        top, share = unigram_baseline(args.run_dir)
        tokenizer, _ = tokenizer_files.load(run.tokenizer_dir)
        answer = tokenizer.id_to_token(top)
        if fs.exists(run.metrics):
            accuracy = fs.read_json(run.metrics)["eval_accuracy"]
            print(
                f"eval masked accuracy {100 * accuracy:.1f} % vs {100 * share:.1f} % for "
                f"always answering {answer!r} (unigram baseline): {accuracy / share:.1f}x"
            )
        else:
            print(f"unigram baseline: always answering {answer!r} scores {100 * share:.1f} %")

    return run_cli(body, argv)
