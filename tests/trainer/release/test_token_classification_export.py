"""The tagger's transformers export: `pipeline("token-classification")` on the folder gives the
tags our Keras tagger gives each word (its first piece's), and the logits within 1e-4, for
RoBERTa (byte-level BPE, with its prefix space), BERT and ModernBERT (WordPiece); the folder's
tensors are exactly the names transformers' `*ForTokenClassification` has, labels in its config.

The taggers are built, not fine-tuned (seconds): every weight of the tiny models is random
(`make_training_dir`), the head's scaled up so that the labels vary from piece to piece.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest

from common import tokenizer_files
from tests.trainer.models.test_checkpoints import make_training_dir
from trainer.finetuning.classifier import PretrainedBackbone
from trainer.models import model_source
from trainer.release import token_classification_export as exporter
from trainer.tasks import word_alignment

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

FAMILIES = ("roberta", "bert", "modernbert")
LABELS = ("O", "B-LOC", "B-PER", "I-PER")
SENTENCES = [
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["Paris", "is", "the", "capital", "of", "France"],
    ["She", "sells", "sea-shells", "by", "the", "sea", "shore", "!"],
    ["x"],
    ["Models", "learn", "to", "predict", "the", "missing", "word"],
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tagger-runs"))
    return {family: make_training_dir(root, family)[0] for family in FAMILIES}


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    """family -> (source, tokenizer info, Keras tagger, its transformers folder)."""
    root = tmp_path_factory.mktemp("tagger-exports")
    found = {}
    for family, run in runs.items():
        source = model_source.resolve(run)
        _, info = tokenizer_files.load(source.tokenizer_dir)
        tagger = exporter.tagger(PretrainedBackbone(source), len(LABELS), 3, info.special_token_ids)
        rng = np.random.default_rng(0)
        for layer in tagger.layers:
            if layer.name in (exporter.LOGITS, exporter.HEAD_DENSE):
                for variable in layer.weights:
                    variable.assign(rng.normal(0, 1.0, variable.shape).astype("float32"))
        folder = exporter.export(source, info, tagger, LABELS, str(root / family))
        found[family] = (source, info, tagger, folder)
    return found


def ours(source, info, tagger, sentences):
    """(per sentence the word tags, the Keras logits, the token ids) as the runner predicts;
    None for a word cut at 32 tokens (which the runner scores as O)."""
    tokenizer, _ = tokenizer_files.load(source.tokenizer_dir)
    aligned = word_alignment.WordAligner(tokenizer, info, 32).align(sentences)
    features = aligned.features(32, info.pad_id)
    features.pop("labels")
    if source.family.takes_segment_ids:
        features["segment_ids"] = np.zeros_like(features["token_ids"])
    logits = np.asarray(tagger.predict(features, verbose=0))
    tags = [
        [
            tag if start != word_alignment.NO_TOKEN else None
            for tag, start in zip(
                word_alignment.word_predictions(row, sentence.word_starts, LABELS),
                sentence.word_starts,
            )
        ]
        for row, sentence in zip(logits.argmax(-1), aligned.sentences)
    ]
    return tags, logits, features


def pipeline_tags(pipe, words: list) -> list:
    """Each word's tag as the pipeline labels its first piece (aggregation none, O kept); None
    for a word beyond the model's 32 tokens (the pipeline cuts there)."""
    pieces = sorted(pipe(" ".join(words)), key=lambda piece: piece["index"])
    owners = word_alignment.token_words(words, [(p["start"], p["end"]) for p in pieces])
    tags = [None] * len(words)
    for piece, owner in zip(pieces, owners):
        tags[owner] = tags[owner] or piece["entity"]
    return tags


def test_the_architecture_is_the_masked_lm_class_s_sibling():
    from trainer import families

    found = {f: exporter.architecture(families.get(f)) for f in FAMILIES}
    assert found == {
        "roberta": "RobertaForTokenClassification",
        "bert": "BertForTokenClassification",
        "modernbert": "ModernBertForTokenClassification",
    }


@pytest.mark.parametrize("family", FAMILIES)
def test_the_pipeline_gives_our_tags(exported, family):
    source, info, tagger, folder = exported[family]
    pipe = transformers.pipeline(
        "token-classification", model=folder, aggregation_strategy="none", ignore_labels=[]
    )
    expected, _, _ = ours(source, info, tagger, SENTENCES)
    found = [pipeline_tags(pipe, words) for words in SENTENCES]
    assert found == expected
    assert len({tag for tags in expected for tag in tags}) > 1  # not one label everywhere
    assert None not in {tag for tags in expected for tag in tags}


@pytest.mark.parametrize("family", FAMILIES)
def test_transformers_computes_our_logits_from_every_exported_weight(exported, family):
    source, info, tagger, folder = exported[family]
    model, loading = transformers.AutoModelForTokenClassification.from_pretrained(
        folder, output_loading_info=True
    )
    assert type(model).__name__ == exporter.architecture(source.family)
    assert not any(loading.values()), loading  # no missing, unexpected or mismatched key
    _, logits, features = ours(source, info, tagger, SENTENCES)
    with torch.no_grad():
        theirs = model(
            input_ids=torch.tensor(features["token_ids"], dtype=torch.long),
            attention_mask=torch.tensor(features["padding_mask"], dtype=torch.long),
        ).logits.numpy()
    mask = features["padding_mask"].astype(bool)
    diff = np.abs(theirs[mask] - logits[mask]).max()
    print(f"{family}: max abs logit difference {diff:.1e}")
    assert diff < 1e-4


@pytest.mark.parametrize("family", FAMILIES)
def test_the_config_names_the_labels_and_the_class(exported, family):
    source, _, _, folder = exported[family]
    config = json.loads((pathlib.Path(folder) / "config.json").read_text())
    assert config["architectures"] == [exporter.architecture(source.family)]
    assert config["id2label"] == {str(i): label for i, label in enumerate(LABELS)}
    assert config["label2id"] == {label: i for i, label in enumerate(LABELS)}
    assert transformers.AutoConfig.from_pretrained(folder).num_labels == len(LABELS)


CORPUS = [
    "EU rejects German call to boycott British lamb .",
    "Peter Blackburn spoke in Brussels on Thursday .",
    "Germany's representative to the European Union's committee spoke .",
] * 20


@pytest.mark.parametrize(
    ("family", "kind", "size"), [("roberta", "bpe", 280), ("bert", "unigram", 150)]
)
def test_the_pipeline_gives_our_tags_with_train_tokenizer_s_own_tokenizers(
    runs, tmp_path, family, kind, size
):
    """As `beam_pipelines.train_tokenizer` writes them: byte-level BPE with RobertaProcessing
    (offsets trimmed of the prefix space) and unigram with Metaspace (a lone '▁' piece can
    start a word); the run's weights, its tokenizer replaced (ids within its embeddings)."""
    from beam_pipelines import tokenizer_models

    tokenizer, trainer = tokenizer_models.build(kind, size, min_frequency=1)
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer = tokenizer_models.canonical_ids(tokenizer, kind)
    tokenizer_files.add_post_processor(tokenizer, kind)
    run = shutil.copytree(runs[family], tmp_path / "run")
    shutil.rmtree(run / "tokenizer")
    tokenizer_files.save(
        tokenizer, str(run / "tokenizer"), tokenizer_files.SPECIAL_TOKENS[kind], 32
    )
    source = model_source.resolve(str(run))
    _, info = tokenizer_files.load(source.tokenizer_dir)
    tagger = exporter.tagger(PretrainedBackbone(source), len(LABELS), 5, info.special_token_ids)
    rng = np.random.default_rng(1)
    for variable in tagger.get_layer(exporter.LOGITS).weights:
        variable.assign(rng.normal(0, 1.0, variable.shape).astype("float32"))
    folder = exporter.export(source, info, tagger, LABELS, str(tmp_path / "hf"))
    pipe = transformers.pipeline(
        "token-classification", model=folder, aggregation_strategy="none", ignore_labels=[]
    )
    sentences = [sentence.split() for sentence in CORPUS[:3]] + [["Zürich", "Blackburnian", "!"]]
    expected, _, _ = ours(source, info, tagger, sentences)
    assert [pipeline_tags(pipe, words) for words in sentences] == expected
    if kind == "bpe":  # 280 pieces: the longer sentences are cut, on both sides alike
        assert sum(tags.count(None) for tags in expected) > 0
