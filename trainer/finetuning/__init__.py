"""Fine-tuning a pretrained encoder on a labelled task: `python -m trainer.finetune`.

The modules, bottom up: `task_kinds/` (one module per kind: classification, regression),
`metrics` (scores by hand, numpy only), `datasets` (rows of JSONL, CSV or TSV files into texts
and labels), `hub` (Hugging Face datasets by name), `glue` (GLUE's eight tasks in their own
layout, their recipes and the GLUE score), `unscored` (a test split without labels), `packing`
(our tokenizer's ids, packed the family's way), `pooling` (CLS or mean), `classifier` (the
family's classifier on the pretrained or a fresh backbone), `recipes` (the recipe by size),
`divergence` (a seed whose loss turns non-finite), `interruption` (SIGTERM on a pod),
`protocol` (seeds, epochs, selection on dev, collapse), `auto_rate` (`--learning_rate auto`),
`pretraining` (the masked accuracy of the model being judged), `results` (results.json and the
printed table), `output_folder` (what an earlier run left), `card_scores` (the scores into an
export's model cards), `jobs` (the flags resolved once: one frozen `Job` per task) and
`job_run` (each job run) and `finetune` (the command).
"""
