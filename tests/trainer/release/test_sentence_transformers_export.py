"""`trainer.export --format sentence-transformers`: `SentenceTransformer(path)` loads the folder
with no code of ours and gives our Keras embeddings (trainer/release/embeddings.py) within 1e-5,
for every family and both poolings; the folder is re-exported over and a stray file refused.

Measured on both backends (tiny models, fp32): max abs difference 1.8e-7.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from common import publish, tokenizer_files
from tests.trainer.models.test_checkpoints import MAX_LENGTH, make_training_dir
from trainer.models import model_source
from trainer.release import embeddings, export
from trainer.release import sentence_transformers_export as st_export

transformers = pytest.importorskip("transformers")
sentence_transformers = pytest.importorskip("sentence_transformers")

FAMILIES = ("roberta", "bert", "modernbert")
ST = st_export.FORMAT
TOLERANCE = 1e-5
# Lengths from one word to past the model's 32 tokens (cut), and a text quoting control tokens,
# which both sides must read as characters.
TEXTS = [
    "The cat sat.",
    "x",
    "Paris is the capital of France and Rome is the capital of Italy.",
    " ".join(["The quick brown fox jumps over the lazy dog."] * 6),
    "She wrote <s>old</s> [CLS] <mask> [MASK] in the margin.",
]
# transformers' names of what a bare encoder (AutoModel) has that the masked LM's checkpoint
# has not: the pooler, which sentence-transformers never reads (it pools the token states).
POOLER = ("pooler.",)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("st-runs"))
    return {family: make_training_dir(root, family)[0] for family in FAMILIES}


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    """(family, pooling) -> the export's folder, written on first use."""
    root = tmp_path_factory.mktemp("st-exports")
    folders = {}

    def get(family, how):
        if (family, how) not in folders:
            out = str(root / f"{family}-{how}")
            paths = export.export(runs[family], out, ST, pooling=how)
            assert paths == {ST: out}
            folders[family, how] = out
        return folders[family, how]

    return get


def load(path):
    # Nothing may come from the network: local files only (not HF_HUB_OFFLINE, which would
    # leak into the worker's later tests, such as a push to a local stand-in Hub).
    return sentence_transformers.SentenceTransformer(path, device="cpu", local_files_only=True)


@pytest.mark.parametrize("how", ["mean", "cls"])
@pytest.mark.parametrize("family", FAMILIES)
def test_sentence_transformers_gives_our_vectors(runs, exported, family, how):
    model = load(exported(family, how))
    theirs = model.encode(TEXTS, batch_size=8)
    ours = embeddings.Embedder(model_source.resolve(runs[family]), how).embed(TEXTS)
    diff = np.abs(ours - theirs).max()
    print(f"{family} {how}: max abs difference {diff:.1e}")
    assert theirs.dtype == ours.dtype == np.float32 and ours.shape == (len(TEXTS), 32)
    assert diff <= TOLERANCE
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)
    assert model.similarity_fn_name == "cosine"
    assert model.max_seq_length == MAX_LENGTH
    assert [type(m).__name__ for m in model] == ["Transformer", "Pooling", "Normalize"]
    assert model[1].pooling_mode == how


@pytest.mark.parametrize("family", FAMILIES)
def test_the_encoder_loads_every_weight_of_the_export(exported, family):
    """sentence-transformers loads the folder with AutoModel: every encoder weight is read;
    what is missing is at most the pooler, left at random and never read for the vectors."""
    folder = exported(family, "mean")
    _, info = transformers.AutoModel.from_pretrained(folder, output_loading_info=True)
    assert all(k.startswith(POOLER) for k in info["missing_keys"]), info["missing_keys"]
    assert not info["mismatched_keys"] and not info["error_msgs"]


def test_the_files_are_sentence_transformers_formats(exported):
    folder = Path(exported("roberta", "cls"))
    read = lambda name: json.loads((folder / name).read_text())  # noqa: E731
    assert [(m["path"], m["type"]) for m in read(st_export.MODULES)] == [
        ("", "sentence_transformers.models.Transformer"),
        ("1_Pooling", "sentence_transformers.models.Pooling"),
        ("2_Normalize", "sentence_transformers.models.Normalize"),
    ]
    pooling = read(st_export.POOLING_CONFIG)
    assert pooling["word_embedding_dimension"] == 32
    assert [k for k, on in pooling.items() if on is True] == ["pooling_mode_cls_token"]
    assert read(st_export.SBERT_CONFIG) == {"max_seq_length": MAX_LENGTH, "do_lower_case": False}
    config = read(st_export.ST_CONFIG)
    assert config["model_type"] == "SentenceTransformer"
    assert config["similarity_fn_name"] == "cosine"
    assert config["__version__"]["sentence_transformers"] == sentence_transformers.__version__
    assert read(tokenizer_files.TOKENIZER_CONFIG)["split_special_tokens"] is True
    card = (folder / "README.md").read_text()
    assert "library_name: sentence-transformers" in card
    assert "pipeline_tag: sentence-similarity" in card and "SentenceTransformer(" in card
    assert "cls pooling" in card


@pytest.mark.parametrize("family", ["roberta", "bert"])
def test_our_ids_are_fine_tunings_packing_of_one_text(runs, family):
    from trainer.finetuning.packing import Packer

    source = model_source.resolve(runs[family])
    tokenizer, info = tokenizer_files.load(source.tokenizer_dir)
    packer = Packer(tokenizer, info, source.family, MAX_LENGTH)
    other, _ = tokenizer_files.load(source.tokenizer_dir)
    rows = embeddings.text_rows(other, info, TEXTS, MAX_LENGTH)
    assert rows == packer.pack(TEXTS).rows


def test_a_text_gets_one_vector_whatever_its_batch(runs):
    embedder = embeddings.Embedder(model_source.resolve(runs["bert"]), "mean")
    alone = embedder.embed(TEXTS[:1])
    padded = embedder.embed(TEXTS, batch_size=len(TEXTS))  # padded to the longest text
    np.testing.assert_allclose(padded[:1], alone, atol=1e-6)
    assert embedder.embed([]).shape == (0, 32)


def test_a_re_export_replaces_it_and_a_stray_file_is_refused(runs, tmp_path, capsys):
    out = tmp_path / "st"
    args = ["--checkpoint", runs["roberta"], "--output_dir", str(out)]
    assert export.main([*args, "--format", ST]) == 0
    assert export.main([*args, "--format", ST, "--pooling", "cls"]) == 0  # over itself
    assert json.loads((out / st_export.POOLING_CONFIG).read_text())["pooling_mode_cls_token"]
    for stray in ("notes.txt", "1_Pooling/extra.json"):
        (out / stray).write_text("mine")
        capsys.readouterr()
        assert export.main([*args, "--format", "hf"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not an earlier output" in err[0] and stray in err[0], err
        (out / stray).unlink()
    assert export.main([*args, "--format", "hf"]) == 0  # another format replaces it whole
    assert not (out / st_export.MODULES).exists() and (out / "config.json").exists()
    assert export.main([*args, "--format", ST]) == 0  # and it the hf export
    assert (out / st_export.MODULES).exists()


def test_pooling_is_a_flag_of_this_format_only_and_all_is_unchanged(runs, tmp_path, capsys):
    args = ["--checkpoint", runs["roberta"], "--output_dir", str(tmp_path / "out")]
    assert export.main([*args, "--format", "hf", "--pooling", "cls"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--pooling is for --format sentence-transformers" in err[0], err
    assert export.formats_of("all") == ("keras-hub", "hf")
    target = publish.parse("hf://org/name")
    assert publish.repos_for(target, export.formats_of(ST)) == {ST: target}


def test_a_tokenizer_that_does_not_frame_texts_is_refused(runs, tmp_path):
    """Without its post-processor the tokenizer would feed the model no start and end tokens:
    other vectors than ours."""
    source = model_source.resolve(runs["bert"])
    bare = tmp_path / "tokenizer"
    shutil.copytree(source.tokenizer_dir, bare)
    spec = json.loads((bare / tokenizer_files.TOKENIZER_JSON).read_text())
    spec["post_processor"] = None
    (bare / tokenizer_files.TOKENIZER_JSON).write_text(json.dumps(spec))
    _, info = tokenizer_files.load(str(bare))
    st_export.check_framing(source.tokenizer_dir, info, MAX_LENGTH)  # the run's own: framed
    with pytest.raises(st_export.SentenceTransformersExportError, match="post-processor"):
        st_export.check_framing(str(bare), info, MAX_LENGTH)
