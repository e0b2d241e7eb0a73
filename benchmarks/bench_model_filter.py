"""The model-based quality filter's cost: documents/s per CPU core for each classifier kind,
and what that means in core-hours per TB of text (beam_pipelines/model_filter.py).

    python -m benchmarks.bench_model_filter [--docs 2000 --hf_docs 96 --doc_chars 3000]
        [--fasttext MODEL.bin] [--hf FOLDER ...] [--sizes tiny,base]

Documents: the demo corpus' docstrings (beam_pipelines/demo_corpus.py, no download) joined
into documents of about `--doc_chars` characters (web pages' median is a few KB). Models:
the given files, else made here with random weights (speed does not depend on what a model
learned): a bigram fastText classifier trained on these documents (dim `--ft_dim`, as DCLM's
kind) and transformers BERT classifiers of the `--sizes` asked (base: 110M parameters, the
size of FineWeb-Edu's classifier) with a BPE tokenizer trained here, reading
`--max_tokens` tokens. Each is timed twice on one core (torch and fastText on one thread):
the scorer alone over batches of similar length (as RunInference's length buckets give),
and through Beam (`RunInference` with our handler on the FnApiRunner, one worker), less the
same pipeline without it and less the model's load (printed apart: once per worker process).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time

import apache_beam as beam

from beam_pipelines import demo_corpus, model_filter, quality_models

SIZES = {  # (hidden, layers, heads, intermediate)
    "tiny": (128, 2, 2, 512),
    "small": (256, 4, 4, 1024),
    "base": (768, 12, 12, 3072),
}


def documents(count: int, chars: int) -> list[str]:
    """Docstrings joined into `count` documents of about `chars` characters."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "corpus.jsonl")
        demo_corpus.write_corpus(path, max_bytes=count * chars * 2)
        pieces = [json.loads(line)["text"] for line in open(path, encoding="utf-8")]
    docs, current = [], []
    for piece in pieces:
        current.append(piece)
        if sum(map(len, current)) >= chars:
            docs.append("\n\n".join(current))
            current = []
        if len(docs) == count:
            break
    return docs


def fasttext_model(docs: list[str], folder: str, dim: int) -> str:
    import fasttext

    rng = random.Random(0)
    lines = [f"__label__{rng.choice(['hq', 'lq'])} {' '.join(doc.split())}" for doc in docs]
    with open(os.path.join(folder, "train.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    for seed in range(1, 6):  # fastText 0.9 stops now and then on "Encountered NaN"
        try:
            model = fasttext.train_supervised(
                os.path.join(folder, "train.txt"),
                dim=dim,
                wordNgrams=2,
                epoch=1,
                thread=1,
                seed=seed,
                verbose=0,
            )
            break
        except RuntimeError:
            continue
    path = os.path.join(folder, "quality.bin")
    model.save_model(path)
    return path


def transformers_model(docs: list[str], folder: str, size: str, max_tokens: int) -> str:
    import tokenizers
    import transformers

    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator(
        docs, tokenizers.trainers.BpeTrainer(vocab_size=30_000, special_tokens=specials)
    )
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=max_tokens,
    )
    hidden, layers, heads, inner = SIZES[size]
    config = transformers.BertConfig(
        vocab_size=len(fast),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=inner,
        max_position_embeddings=512,
        id2label={0: "lq", 1: "hq"},
        label2id={"lq": 0, "hq": 1},
    )
    path = os.path.join(folder, f"bert-{size}")
    transformers.BertForSequenceClassification(config).save_pretrained(path)
    fast.save_pretrained(path)
    return path


def spec_for(path: str, label: str, args) -> quality_models.QualityModelSpec:
    return quality_models.load(
        quality_models.QualityModelSpec(
            path, label, 0.5, None, args.max_tokens, args.batch_size, "remove"
        )
    )


def scorer_alone(spec, docs: list[str]) -> tuple[float, float]:
    """(seconds to load the model, seconds to score `docs` in batches of similar length)."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        score = quality_models.open_scorer(spec, folder)
        load = time.perf_counter() - start
        ordered = sorted(docs, key=len)
        score(ordered[: spec.batch_size])  # warm-up: first calls allocate
        start = time.perf_counter()
        for i in range(0, len(ordered), spec.batch_size):
            score(ordered[i : i + spec.batch_size])
        return load, time.perf_counter() - start


def _pipeline_seconds(docs: list[str], step=None) -> float:
    from beam_pipelines.documents import Document

    start = time.perf_counter()
    options = beam.options.pipeline_options.PipelineOptions(
        ["--runner=FnApiRunner", "--direct_num_workers=1"]
    )
    with beam.Pipeline(options=options) as p:
        pcoll = p | beam.Create([Document("bench", i, d, "train") for i, d in enumerate(docs)])
        if step is not None:
            pcoll = pcoll | step
        _ = pcoll | beam.combiners.Count.Globally()
    return time.perf_counter() - start


def through_beam(spec, docs: list[str]) -> float:
    """Seconds RunInference with our handler adds to a pipeline over `docs` (the model's load
    included: the caller subtracts it), one worker on the FnApiRunner: the same pipeline
    without it is subtracted."""
    with_model = _pipeline_seconds(
        docs, model_filter.RunInference(model_filter.QualityHandler(spec))
    )
    return with_model - _pipeline_seconds(docs)


def row(name: str, docs: list[str], alone: float, beam_seconds: float, load: float) -> str:
    chars = sum(len(d.encode("utf-8")) for d in docs)
    per_core = len(docs) / alone
    core_hours_tb = 1e12 / (chars / alone) / 3600
    return (
        f"| {name} | {len(docs):,} | {chars / len(docs):,.0f} | {per_core:,.1f} | "
        f"{chars / alone / 1e6:.2f} | {core_hours_tb:,.0f} | {len(docs) / beam_seconds:,.1f} | "
        f"{load:.1f} |"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument(
        "--hf_docs", type=int, default=96, help="documents for each transformers model"
    )
    parser.add_argument("--doc_chars", type=int, default=3000)
    parser.add_argument("--fasttext", help="a fastText model file (default: one trained here)")
    parser.add_argument("--ft_dim", type=int, default=256)
    parser.add_argument("--hf", nargs="*", default=[], help="transformers folders")
    parser.add_argument("--hf_label", default="good", help="the label --hf folders score")
    parser.add_argument("--sizes", default="tiny,base", help=f"of {sorted(SIZES)}, or none")
    parser.add_argument("--max_tokens", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # one core: a Dataflow worker runs a process per core
    docs = documents(args.docs, args.doc_chars)
    print(
        f"{len(docs):,} documents of {sum(map(len, docs)) / len(docs):,.0f} characters on average"
    )
    print(
        "| model | documents | bytes/doc | docs/s per core | MB/s per core | core-hours per TB "
        "| docs/s through Beam | model load s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        ft = args.fasttext or fasttext_model(docs, folder, args.ft_dim)
        models = [("fastText", ft, docs, "hq")]
        sizes = [s for s in args.sizes.split(",") if s in SIZES]
        models += [
            (
                f"BERT {s} (random)",
                transformers_model(docs, folder, s, args.max_tokens),
                docs[: args.hf_docs],
                "hq",
            )
            for s in sizes
        ]
        models += [(path, path, docs[: args.hf_docs], args.hf_label) for path in args.hf]
        for name, path, part, label in models:
            spec = spec_for(path, label, args)
            load, alone = scorer_alone(spec, part)
            beam_seconds = through_beam(spec, part) - load
            print(row(name, part, alone, beam_seconds, load), flush=True)


if __name__ == "__main__":
    main()
