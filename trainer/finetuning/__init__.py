"""Fine-tuning a pretrained encoder on a labelled task: `python -m trainer.finetune` (where
tasks come from is the room below, trainer/tasks/).

The modules, bottom up: `packing` (our tokenizer's ids, packed the family's way), `classifier`
(the family's classifier on the pretrained or a fresh backbone; what its head reads, CLS or
mean, is `trainer.models.pooling`, which the release's embeddings share),
`recipes` (the one `Recipe`, by size), `contrastive` (InfoNCE and gradient caching, for
embedding models), `divergence` (a seed whose loss turns non-finite),
`interruption` (SIGTERM on a pod), `protocol` (seeds, epochs, selection on dev, collapse),
`auto_rate` (`--learning_rate auto`), `masked_accuracy` (how well the model being judged learnt
its pretraining task), `results` (results.json and the printed table), `output_folder` (what an
earlier run left), `card_scores` (the scores into an export's model cards), `jobs` (the flags
resolved once: one frozen `Job` per task) and `job_run` (each job run) and `finetune` (the
command). The kinds with a loop of their own (`runners`: the module a kind's record names):
`embedding_run` (contrastive training scored by retrieval; `embedding_data`, `embedding_step`,
`embedding_results`), `reranker_run` (a cross-encoder reranking BM25's candidates) and
`tagging_run` (token classification).
"""
