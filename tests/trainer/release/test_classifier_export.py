"""A fine-tuned text classifier as a transformers `*ForSequenceClassification` folder with its
labels (trainer/release/classifier_export.py): `AutoModelForSequenceClassification` and
`AutoTokenizer` give our logits (within 1e-4) on single texts and pairs, the
`text-classification` pipeline names our argmax by the task's label names, and a regression
comes back as our number, unchanged.

Measured (tiny models, fp32, 3 labels): max abs difference of the logits at most 4.8e-6 on
TensorFlow and 5.2e-6 on JAX (RoBERTa pairs, BERT single texts, ModernBERT mean-pooled pairs).
"""

from __future__ import annotations

import numpy as np
import pytest

from common import tokenizer_files
from tests.trainer.models.test_checkpoints import make_training_dir
from trainer.finetuning import packing
from trainer.finetuning.classifier import PretrainedBackbone
from trainer.models import model_source
from trainer.release import classifier_export as ce

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-4
MAX_LENGTH = 32
LABELS = ("contradiction", "entailment", "neutral")  # as a task's files name them, id order
# Short and long texts (the last pair is cut to 32 tokens), and texts quoting control tokens,
# which both sides read as characters.
TEXTS = ["The cat sat.", "Paris", "a <s>b</s> [CLS]", "why", "the quick brown fox"]
PAIRS = [
    "on the mat today",
    "is the capital of France and Rome is the capital of Italy.",
    "in [SEP] </s>",
    "x",
    " ".join(["The quick brown fox jumps over the lazy dog."] * 4),
]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("classifier-runs"))
    families = ("roberta", "bert", "modernbert")
    return {f: model_source.resolve(make_training_dir(root, f)[0]) for f in families}


def fine_tuned(source, pooling: str, outputs: int, seed: int = 3):
    """The family's classifier, its head (and BERT's pooler) moved off their initial values."""
    model = PretrainedBackbone(source, False, pooling).classifier(outputs, seed)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if not variable.path.startswith(model.backbone.name) or "pooled" in variable.path:
            noise = rng.normal(0.0, 0.3, variable.shape).astype("float32")
            variable.assign(np.asarray(variable.numpy()) + noise)
    return model


def export(source, model, labels: dict, pooling: str, folder) -> str:
    info = tokenizer_files.load(source.tokenizer_dir)[1]
    frame = packing.framing(source)
    problem, _ = ce.check(source, info, pooling, MAX_LENGTH, frame)
    assert problem is None
    return ce.export(source, info, model, labels, pooling, MAX_LENGTH, folder, frame)


def ours(source, model, pairs) -> np.ndarray:
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    packed = packing.Packer(tokenizer, info, source.family, MAX_LENGTH).pack(TEXTS, pairs)
    features = packed.features(MAX_LENGTH, info.pad_id, source.family.takes_segment_ids)
    return np.asarray(model.predict(features, verbose=0), np.float32)


def theirs(folder: str, pairs) -> tuple[np.ndarray, object]:
    loaded, found = transformers.AutoModelForSequenceClassification.from_pretrained(
        folder, output_loading_info=True, local_files_only=True
    )
    assert not any(found.values()), found  # nothing missing, unexpected or mismatched
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    encoded = tokenizer(TEXTS, pairs, truncation=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        return loaded(**encoded).logits.numpy(), loaded


@pytest.mark.parametrize(
    ("family", "pooling", "pair"),
    [("roberta", "cls", True), ("bert", "cls", False), ("modernbert", "mean", True)],
)
def test_transformers_gives_our_logits_and_the_pipeline_our_labels(
    sources, tmp_path, family, pooling, pair
):
    source = sources[family]
    model = fine_tuned(source, pooling, len(LABELS))
    folder = export(source, model, ce.label_config(LABELS), pooling, str(tmp_path / "hf"))
    pairs = PAIRS if pair else None
    logits, loaded = theirs(folder, pairs)
    mine = ours(source, model, pairs)
    difference = np.abs(logits - mine).max()
    print(f"{family} {pooling} {'pairs' if pair else 'texts'}: max abs difference {difference:.1e}")
    assert difference < TOLERANCE
    config = loaded.config
    assert type(loaded).__name__ == config.architectures[0] == ce.architecture(source.family)
    assert config.num_labels == 3 and config.problem_type == "single_label_classification"
    assert config.id2label == dict(enumerate(LABELS))
    assert config.label2id == {name: i for i, name in enumerate(LABELS)}
    pipe = transformers.pipeline("text-classification", model=folder, device="cpu")
    given = [{"text": a, "text_pair": b} for a, b in zip(TEXTS, PAIRS)] if pair else TEXTS
    found = pipe(given, truncation=True)
    assert [f["label"] for f in found] == [LABELS[i] for i in mine.argmax(-1)]
    softmax = np.exp(mine) / np.exp(mine).sum(-1, keepdims=True)
    assert [f["score"] for f in found] == pytest.approx(softmax.max(-1), abs=TOLERANCE)


def test_a_regression_is_one_number_the_pipeline_leaves_as_it_is(sources, tmp_path):
    source = sources["roberta"]
    model = fine_tuned(source, "cls", 1)
    folder = export(source, model, ce.label_config(None, "regression"), "cls", str(tmp_path / "hf"))
    config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    assert config.num_labels == 1 and config.problem_type == "regression"
    pipe = transformers.pipeline("text-classification", model=folder, device="cpu")
    found = [f["score"] for f in pipe(TEXTS, truncation=True)]
    assert found == pytest.approx(ours(source, model, None)[:, 0], abs=TOLERANCE)


def test_the_folder_is_whole_and_its_tokenizer_knows_the_length(sources, tmp_path):
    """What a reader without our code needs: the weights, config and tokenizer files."""
    source = sources["bert"]
    labels = ce.label_config(("no", "yes"))
    export(source, fine_tuned(source, "cls", 2), labels, "cls", str(tmp_path / "hf"))
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [
        "config.json",
        "model.safetensors",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    assert tokenizer.model_max_length == MAX_LENGTH


def test_what_transformers_cannot_read_is_one_line_before_training(sources):
    source = sources["roberta"]
    info = tokenizer_files.load(source.tokenizer_dir)[1]
    problem, _ = ce.check(source, info, "mean", MAX_LENGTH, packing.framing(source))
    assert problem.startswith("no transformers export: --pooling mean")
    assert "\n" not in problem


def test_label_config_names_every_class_as_a_string():
    found = ce.label_config((0, 1))
    assert found["id2label"] == {0: "0", 1: "1"} and found["label2id"] == {"0": 0, "1": 1}
    assert found["problem_type"] == "single_label_classification"
    one = ce.label_config(None, "regression")
    assert one == {"num_labels": 1, "problem_type": "regression"}
