"""The results document of an embedding fine-tune (`embedding_run`), in the shape `job_run`
writes (protocol, model, task, data, scores), with BM25's scores beside (`bm25`) and the folder
of the best seed's model (`export`); and the table `trainer.finetune` prints of it."""

from __future__ import annotations

from trainer.finetuning import embedding_data, results


def document(source, backbone, job, ctx, pretrained: dict) -> dict:
    """Everything but the scores, which `embedding_run.run_job` adds."""
    options = job.options
    train = job.splits["train"]
    return {
        "protocol": {
            **results.protocol_facts(job, ctx.max_length),
            "pooling": options.pooling,
            "temperature": options.temperature,
            "gradient_chunk": options.chunk,
            "rows": "packed" if ctx.packed else "padded",  # --packing, as it applied
            "loss": "InfoNCE, in-batch and hard negatives, no text twice in a batch",
            "search": "exact, dot product of unit vectors",
        },
        "model": results.model_facts(source, backbone, job),
        "task": {"name": job.name, "type": job.task_type, "labels": None, "pair": True},
        "data": {
            "train": _train_counts(train, ctx),
            **{s: _split_counts(job.splits[s], ctx) for s in ("dev", "test") if s in job.splits},
        },
        "dataset": None,
        "pretraining": pretrained,
    }


def _train_counts(train, ctx) -> dict:
    rows = ctx.rows
    return {
        "path": train.path,
        "examples": len(train),
        "hard_negatives": rows.hard_negatives,
        "skipped_empty": 0,
        "truncated": rows.queries.truncated + rows.positives.truncated + rows.negatives.truncated,
        "max_length": ctx.max_length,
    }


def _split_counts(data, ctx) -> dict:
    texts = [*data.queries.values(), *data.corpus.values()]
    cut = embedding_data.TextRows.of(ctx.tokenizer, ctx.info, texts, ctx.max_length).truncated
    return {
        "path": data.folder,
        "split": data.split,
        "examples": len(data.queries),
        "documents": len(data.corpus),
        "queries_left_out": data.queries_left_out,
        "skipped_empty": 0,
        "truncated": cut,  # queries and documents cut to the length
        "max_length": ctx.max_length,
    }


def table(document: dict) -> str:
    """The seeds' table (`results.table`), then BM25's scores on the same splits."""
    lines = [results.table(document)]
    for split, scores in document.get("bm25", {}).items():
        said = ", ".join(f"{name} {value:.4f}" for name, value in scores.items())
        lines.append(f"BM25 {split}: {said}")
    if document.get("export"):
        lines.append(f"best seed's model (sentence-transformers): {document['export']}")
    return "\n".join(lines)
