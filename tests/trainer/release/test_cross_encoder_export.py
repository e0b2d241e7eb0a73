"""A fine-tuned cross-encoder as a transformers `*ForSequenceClassification` folder with one label
(trainer/release/cross_encoder_export.py): transformers loads every tensor with none missing
or left over, its tokenizer frames a pair as `packing.Packer` does, and sentence-transformers'
`CrossEncoder` gives our logits (within 1e-4) and sigmoid(our logit) by default, for every
family and ModernBERT's mean pooling.

Measured (tiny models, fp32): max abs difference of the logits at most 3.8e-6 on either backend.
"""

from __future__ import annotations

import numpy as np
import pytest

from common import tokenizer_files
from tests.trainer.models.test_checkpoints import make_training_dir
from trainer.finetuning import packing
from trainer.finetuning.classifier import PretrainedBackbone
from trainer.models import model_source
from trainer.release import cross_encoder_export as ce

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
sentence_transformers = pytest.importorskip("sentence_transformers")

FAMILIES = ("roberta", "bert", "modernbert")
TOLERANCE = 1e-4
MAX_LENGTH = 32
# Short and long texts (the last passage is cut to fit 32 tokens: the longer text is cut on
# both sides), and texts quoting control tokens, which both sides read as characters.
QUERIES = ["The cat sat.", "Paris", "x", "a <s>b</s> [CLS]", "why"]
PASSAGES = [
    "on the mat today",
    "is the capital of France and Rome is the capital of Italy.",
    "the quick brown fox",
    "in [SEP] </s>",
    " ".join(["The quick brown fox jumps over the lazy dog."] * 4),
]
# Both texts longer than half the length, of unequal lengths: both are cut, the longer keeping
# the odd token (tokenizers' LongestFirst, which `packing.truncate_pair` follows).
# 10 and 7 WordPiece tokens in 13: 7 + 6.
BOTH_CUT = ("the cat sat on the mat today and the dog", "the dog sat on the log today")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("cross-encoder-runs"))
    return {f: model_source.resolve(make_training_dir(root, f)[0]) for f in FAMILIES}


def fine_tuned(source, pooling: str, seed: int = 3):
    """The family's classifier with one logit, its head moved off its initial values."""
    model = PretrainedBackbone(source, False, pooling).classifier(1, seed)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if not variable.path.startswith(model.backbone.name) or "pooled" in variable.path:
            noise = rng.normal(0.0, 0.3, variable.shape).astype("float32")
            variable.assign(np.asarray(variable.numpy()) + noise)
    return model


def frame(source):
    return packing.framing(source)


def export(source, info, model, length: int, folder) -> str:
    return ce.export(source, info, model, "cls", length, str(folder), frame(source))


def ours(source, model) -> np.ndarray:
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    packed = packing.Packer(tokenizer, info, source.family, MAX_LENGTH).pack(QUERIES, PASSAGES)
    assert packed.truncated >= 1  # the long passage (and more in a small BPE vocabulary)
    features = packed.features(MAX_LENGTH, info.pad_id, source.family.takes_segment_ids)
    return np.asarray(model.predict(features, verbose=0), np.float32)[:, 0]


@pytest.mark.parametrize(
    ("family", "pooling"), [(f, "cls") for f in FAMILIES] + [("modernbert", "mean")]
)
def test_cross_encoder_gives_our_logits(sources, tmp_path, family, pooling):
    source = sources[family]
    info = tokenizer_files.load(source.tokenizer_dir)[1]
    model = fine_tuned(source, pooling)
    folder = ce.export(
        source, info, model, pooling, MAX_LENGTH, str(tmp_path / "hf"), frame(source)
    )
    cross = sentence_transformers.CrossEncoder(folder, device="cpu", local_files_only=True)
    pairs = list(zip(QUERIES, PASSAGES))
    theirs = cross.predict(pairs, activation_fn=torch.nn.Identity())
    mine = ours(source, model)
    difference = np.abs(theirs - mine).max()
    print(f"{family} {pooling}: max abs difference of the logits {difference:.1e}")
    assert difference < TOLERANCE
    assert np.abs(cross.predict(pairs) - 1 / (1 + np.exp(-mine))).max() < TOLERANCE  # sigmoid


@pytest.mark.parametrize("family", FAMILIES)
def test_every_tensor_is_the_classs_own_and_pairs_are_framed_as_ours(sources, tmp_path, family):
    source = sources[family]
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    folder = export(source, info, fine_tuned(source, "cls"), MAX_LENGTH, tmp_path)
    loaded, found = transformers.AutoModelForSequenceClassification.from_pretrained(
        folder, output_loading_info=True, local_files_only=True
    )
    assert type(loaded).__name__ == ce.architecture(source.family)
    assert loaded.config.num_labels == 1
    assert not any(found.values()), found  # nothing missing, unexpected or mismatched
    from safetensors.numpy import load_file

    written = set(load_file(f"{folder}/model.safetensors"))
    persistent = set(loaded.state_dict()) - {"lm_head.decoder.weight"}  # no LM head here
    assert written == persistent
    packed = packing.Packer(tokenizer, info, source.family, MAX_LENGTH).pack(QUERIES, PASSAGES)
    theirs = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    framed = theirs(QUERIES, PASSAGES, truncation=True)
    assert framed["input_ids"] == packed.rows
    if source.family.takes_segment_ids:  # transformers must feed them, as the model read them
        assert framed["token_type_ids"] == packed.segments
    else:
        assert "token_type_ids" not in framed


def test_the_export_replaces_an_earlier_one_whole(sources, tmp_path):
    source = sources["bert"]
    info = tokenizer_files.load(source.tokenizer_dir)[1]
    for seed in (1, 2):
        export(source, info, fine_tuned(source, "cls", seed), 16, tmp_path / "hf")
    config = transformers.AutoConfig.from_pretrained(str(tmp_path / "hf"))
    assert config.sentence_transformers == ce.ACTIVATION
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [
        "config.json",
        "model.safetensors",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]


def test_mean_pooling_is_refused_where_the_class_reads_the_first_token(sources):
    for family in FAMILIES:
        source = sources[family]
        args = (source.record.backbone_config, {"pad_token": 0, "cls_token": 2, "sep_token": 3})
        problem = ce.pooling_problem(source.family, *args, "mean")
        if family == "modernbert":  # ModernBertForSequenceClassification: classifier_pooling
            assert problem is None
        else:
            assert "reads the first token only" in problem
        assert ce.pooling_problem(source.family, *args, "cls") is None


def test_a_pair_cut_on_both_sides_is_framed_as_ours(sources, tmp_path):
    source = sources["bert"]
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    folder = export(source, info, fine_tuned(source, "cls"), 16, tmp_path)
    packed = packing.Packer(tokenizer, info, source.family, 16).pack(*([t] for t in BOTH_CUT))
    theirs = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert theirs(*BOTH_CUT, truncation=True)["input_ids"] == packed.rows[0]
