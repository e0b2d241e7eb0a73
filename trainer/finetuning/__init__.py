"""Fine-tuning a pretrained encoder on a labelled task: `python -m trainer.finetune`.

The modules, bottom up: `metrics` (scores by hand, numpy only), `datasets` (rows of JSONL,
CSV or TSV files into texts and labels), `packing` (our tokenizer's ids, packed the family's
way), `classifier` (keras-hub's TextClassifier on the pretrained or a fresh backbone),
`protocol` (seeds, epochs, selection on dev, collapse), `pretraining` (the masked accuracy of
the model being judged) and `results` (results.json and the printed table).
"""
