"""Labelled tasks and how they are scored, below the fine-tuning run that trains on them:
`task_kinds/` (one module per kind: classification, regression), `metrics` (scores by hand,
numpy only), `datasets` (rows of JSONL, CSV or TSV files into texts and labels), `hub` (Hugging
Face datasets by name), `glue` (GLUE's eight tasks in their own layout, their defaults and the
GLUE score), `unscored` (a test split without labels), `json_lines` (JSONL files read and checked),
`pairs` (query/positive/negative files,
and batches with no text twice), `retrieval/` (retrieval on BEIR's layout: nDCG, MRR and
recall, exact search in chunks, BM25 as the floor), `tagging` (word-level tagged files, CoNLL
columns or JSONL: sentences, the label set, the IOB1/IOB2/BIOES scheme, unseen dev tags),
`word_alignment` (word labels onto the first piece of each word, tokenized as running text),
`entity_f1` (entity-level precision, recall and F1 by seqeval)."""
