"""Fine-tuning a pretrained encoder on a labelled task: `python -m trainer.finetune`.

The modules, bottom up: `metrics` (scores by hand, numpy only), `datasets` (rows of JSONL,
CSV or TSV files into texts and labels), `packing` (our tokenizer's ids, packed the family's
way), `classifier` (keras-hub's TextClassifier on the pretrained or a fresh backbone),
`protocol` (seeds, epochs, selection on dev, collapse), `pretraining` (the masked accuracy of
the model being judged), `results` (results.json and the printed table), `glue` (GLUE's eight
tasks in their own layout, their recipes and the GLUE score) and `card_scores` (the scores
into an export's model cards).
"""
