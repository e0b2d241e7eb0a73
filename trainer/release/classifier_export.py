"""A fine-tuned text classifier (the classification job's: `--task_type classification` or
`regression`, trainer/finetuning/job_run.py) as a transformers `*ForSequenceClassification`
folder with its labels, which `pipeline("text-classification", model=folder)` and
`AutoModelForSequenceClassification` load with no code of ours and score as we do.

The folder is the cross-encoder's (`cross_encoder_export.write_classifier`: the backbone under
the masked-LM export's names, the head mapped from the Keras classifier's layers, the pooling
transformers can express, a tokenizer that frames a pair as `packing.Packer` does and whose
`model_max_length` is the fine-tuning's length); only the config's labels differ:

- classification: `num_labels` N, `id2label` / `label2id` the task's label names in id order
  (as the job encodes them: the training file's values sorted, a dataset's class names, or
  GLUE's, `finetuning.best_export.label_names`), `problem_type` "single_label_classification":
  the pipeline's softmax is the probability of each label that cross-entropy trained;
- regression: `num_labels` 1, `problem_type` "regression": the pipeline applies no function
  and gives the number squared error trained.

What cannot be exported is found before training (`check`): one line the job records in
results.json instead of a folder (a head on the mean of the tokens, which a transformers class
without `classifier_pooling` cannot read). The job still fine-tunes and scores: the export is
what it leaves behind, not what it measures.

Example:
    >>> problem, note = check(source, info, "cls", 128, frame)     # before training
    >>> labels = label_config(("negative", "positive"))
    >>> export(source, info, model, labels, "cls", 128, "out/hf", frame)
    'out/hf'
"""

from __future__ import annotations

from trainer.release import cross_encoder_export

SINGLE_LABEL = "single_label_classification"  # transformers' problem_type of N named classes


def architecture(family) -> str:
    """transformers' sequence-classification class of the family (`RobertaFor...`)."""
    return cross_encoder_export.architecture(family)


def label_config(names: tuple | None, problem_type: str = SINGLE_LABEL) -> dict:
    """The config's entries that say what the logits are: the label names in id order, or
    None for one number, whose `problem_type` the caller names (transformers' "regression":
    its pipeline then applies no function, where one label would get a sigmoid)."""
    if names is None:
        return {"num_labels": 1, "problem_type": problem_type}
    names = [str(name) for name in names]
    return {
        "id2label": dict(enumerate(names)),
        "label2id": {name: i for i, name in enumerate(names)},
        "problem_type": problem_type,
    }


def predict(names: tuple | None) -> str:
    """How to get what the job scored from the folder (results.json `export.predict`)."""
    call = 'pipeline("text-classification", model=path)(texts, truncation=True)'
    pair = '; a pair as {"text": a, "text_pair": b}'
    if names is None:
        return f"{call} gives the predicted number as `score` (no function applied){pair}"
    return (
        f"{call} gives the label name (id2label) and its softmax probability; top_k=None "
        f"gives every label's{pair}"
    )


def check(source, info, pooling: str, max_length: int, frame) -> tuple[str | None, str]:
    """(why there can be no export, or None; the note of its tokenizer files, empty when
    tokenizer.json is kept as it is), before any training."""
    args = (source.family, source.record.backbone_config, info.special_token_ids, pooling)
    problem = cross_encoder_export.pooling_problem(*args)
    if problem:
        return f"no transformers export: {problem}", ""
    try:
        return None, cross_encoder_export.check(source, info, max_length, frame)
    except cross_encoder_export.CrossEncoderExportError as error:
        return f"no transformers export: {error}", ""


def export(source, info, model, labels: dict, pooling: str, max_length: int, output_dir, frame):
    """Writes `model` (the fine-tuned keras-hub classifier) as a transformers folder whole,
    `labels` its `label_config`; returns `output_dir`."""
    return cross_encoder_export.write_classifier(
        source, info, model, pooling, max_length, str(output_dir), frame, labels
    )
