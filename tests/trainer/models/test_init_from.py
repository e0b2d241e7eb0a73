"""--init_from: continued pretraining from tiny transformers checkpoints written offline with
`save_pretrained` (RoBERTa, BERT), read through the export's weight table backwards.

Logit parity runs on both backends; the one training run (first evaluation at the checkpoint's
loss, restarts) runs on TensorFlow only (the JAX pass of CI is for what differs by backend).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from common.errors import UserError
from tests.trainer.mlm_data import SEQ_LEN, make_tokenizer, saved_run, task_args
from trainer.models import init_from, model, starting_point
from trainer.release import export

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-4  # the export test's (tests/trainer/release/test_export.py)
BERT_SHIPPED_TOLERANCE = 5e-3  # ditto: keras-hub's BERT head differs from HF's (see there)
VOCAB = 100


def hf_checkpoint(
    folder, family, *, pad_id=1, positions=SEQ_LEN, canonical=False, tokenizer=False, **overrides
):
    """A tiny RobertaForMaskedLM / BertForMaskedLM, weights noised so logits are not flat.
    `canonical`: RoBERTa's rows that HF never reads and its token-type row are zero (what our
    export writes), so that a round trip can be compared tensor by tensor."""
    torch.manual_seed(0)
    kwargs = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        pad_token_id=pad_id,
    )
    if family == "roberta":
        kwargs.update(
            max_position_embeddings=positions + pad_id + 1, type_vocab_size=1, layer_norm_eps=1e-5
        )
        classes = transformers.RobertaConfig, transformers.RobertaForMaskedLM
    else:  # keras-hub's BERT layers compute the tanh GELU (trainer/families/bert.py)
        kwargs.update(max_position_embeddings=positions, hidden_act="gelu_pytorch_tanh")
        classes = transformers.BertConfig, transformers.BertForMaskedLM
    hf = classes[1](classes[0](**{**kwargs, **overrides})).eval()
    with torch.no_grad():
        for parameter in hf.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
        if family == "roberta" and canonical:
            hf.roberta.embeddings.position_embeddings.weight[: pad_id + 1] = 0
            hf.roberta.embeddings.token_type_embeddings.weight.zero_()
    hf.save_pretrained(str(folder))
    if tokenizer:
        make_tokenizer(folder)
    return hf


def loaded(folder):
    initial = init_from.resolve(str(folder))
    masked_lm = model.build_masked_lm(initial.family, initial.backbone_config)
    init_from.load_into(masked_lm, initial)
    return initial, masked_lm


def logits(masked_lm, hf, family, pad_id):
    rng = np.random.default_rng(0)
    ids = rng.integers(5, VOCAB, (3, SEQ_LEN)).astype(np.int32)
    mask = np.ones_like(ids)
    ids[1, 20:], mask[1, 20:] = pad_id, 0  # right padding, as HF RoBERTa's positions need
    inputs = {
        "token_ids": ids,
        "padding_mask": mask,
        "mask_positions": np.tile(np.arange(SEQ_LEN, dtype=np.int32), (3, 1)),
    }
    if family == "bert":
        inputs["segment_ids"] = np.zeros_like(ids)
    ours = np.asarray(masked_lm(inputs, training=False))
    with torch.no_grad():
        theirs = hf(
            input_ids=torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)
        ).logits.numpy()
    valid = mask.astype(bool)
    return ours[valid], theirs[valid]


def test_roberta_logits_match_transformers_after_load(tmp_path):
    hf = hf_checkpoint(tmp_path, "roberta")  # a non-zero token-type row: folded, not dropped
    initial, masked_lm = loaded(tmp_path)
    assert (initial.family.name, initial.kind) == ("roberta", "hf")
    assert initial.backbone_config["max_sequence_length"] == SEQ_LEN
    ours, theirs = logits(masked_lm, hf, "roberta", pad_id=1)
    diff = np.abs(ours - theirs).max()
    print(f"roberta max abs logit difference after --init_from load: {diff:.2e}")
    assert diff <= TOLERANCE


def test_bert_logits_match_transformers_after_load(tmp_path):
    hf = hf_checkpoint(tmp_path, "bert", pad_id=0)
    _, masked_lm = loaded(tmp_path)
    ours, theirs = logits(masked_lm, hf, "bert", pad_id=0)
    print(f"bert max abs logit difference (as shipped): {np.abs(ours - theirs).max():.2e}")
    assert np.abs(ours - theirs).max() <= BERT_SHIPPED_TOLERANCE
    transform = hf.cls.predictions.transform  # HF's head set like keras-hub's: every weight
    transform.transform_act_fn, transform.LayerNorm.eps = torch.nn.GELU(), 1e-5
    ours, theirs = logits(masked_lm, hf, "bert", pad_id=0)
    diff = np.abs(ours - theirs).max()
    print(f"bert max abs logit difference (keras-hub head settings): {diff:.2e}")
    assert diff <= TOLERANCE


@pytest.mark.parametrize("family", ["roberta", "bert"])
def test_export_of_the_loaded_model_is_the_input_checkpoint(tmp_path, family):
    """What a 0-step continued run exports: the checkpoint's tensors, bit for bit."""
    from safetensors.numpy import load_file

    hf_checkpoint(tmp_path, family, pad_id=0, canonical=True)
    initial, masked_lm = loaded(tmp_path)
    exported = export.hf_state_dict(masked_lm, initial.family, initial.pad_id)
    original = load_file(str(tmp_path / "model.safetensors"))
    assert exported.keys() == original.keys()
    for name, value in original.items():
        np.testing.assert_array_equal(exported[name], value, err_msg=name)


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda c, w: c.update(hidden_act="relu"), "hidden_act"),
        (lambda c, w: c.update(model_type="deberta-v2"), "'deberta-v2'"),
        (lambda c, w: c.update(layer_norm_eps=1e-12), "layer_norm_eps"),
        (
            lambda c, w: w.update({"lm_head.extra.weight": np.zeros(3, np.float32)}),
            "lm_head.extra.weight",
        ),
        (lambda c, w: w.pop("lm_head.bias"), "lacks lm_head.bias"),
    ],
)
def test_what_the_model_cannot_represent_is_refused_naming_it(tmp_path, change, named):
    from safetensors.numpy import load_file, save_file

    hf_checkpoint(tmp_path, "roberta")
    config = json.loads((tmp_path / "config.json").read_text())
    weights = load_file(str(tmp_path / "model.safetensors"))
    change(config, weights)
    (tmp_path / "config.json").write_text(json.dumps(config))
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(init_from.InitFromError, match=named) as caught:
        init_from.resolve(str(tmp_path))
    assert "\n" not in str(caught.value)


def test_pooler_and_next_sentence_heads_are_skipped_with_a_note(tmp_path, capsys):
    """roberta-base / bert-base ship them; transformers' *ForMaskedLM drops them too."""
    from safetensors.numpy import load_file, save_file

    hf = hf_checkpoint(tmp_path, "roberta")
    weights = load_file(str(tmp_path / "model.safetensors"))
    weights.update(
        {
            "roberta.pooler.dense.weight": np.ones((32, 32), np.float32),
            "roberta.pooler.dense.bias": np.ones(32, np.float32),
        }
    )
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    _, masked_lm = loaded(tmp_path)
    assert (
        "not loading roberta.pooler.dense.bias, roberta.pooler.dense.weight"
        in capsys.readouterr().out
    )
    ours, theirs = logits(masked_lm, hf, "roberta", pad_id=1)
    assert np.abs(ours - theirs).max() <= TOLERANCE


def test_a_tokenizer_json_without_its_config_is_checked_by_size_and_pad(tmp_path, capsys):
    """roberta-base's Hub repo ships tokenizer.json and no tokenizer_config.json."""
    from common import tokenizer_files

    hf_checkpoint(tmp_path, "roberta", pad_id=0, tokenizer=True)
    os.remove(tmp_path / "tokenizer_config.json")
    initial = init_from.resolve(str(tmp_path))
    assert (
        initial.tokenizer is None and "note: the checkpoint's tokenizer" in capsys.readouterr().out
    )
    info = tokenizer_files.TokenizerInfo("f" * 64, VOCAB, {"pad_token": 0})
    starting_point.check_tokenizer(initial, info, "data-tokenizer")  # size and pad agree
    with pytest.raises(init_from.InitFromError, match="pads with id 3"):
        starting_point.check_tokenizer(
            initial,
            tokenizer_files.TokenizerInfo("f" * 64, VOCAB, {"pad_token": 3}),
            "data-tokenizer",
        )


def test_a_hub_id_that_cannot_be_downloaded_is_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no network in tests: the refusal path
    with pytest.raises(init_from.InitFromError, match="Hub download failed") as caught:
        init_from.resolve("no-such-org-here/no-such-model")
    assert "\n" not in str(caught.value)


def test_bfloat16_checkpoints_load(tmp_path):
    hf = hf_checkpoint(tmp_path / "f32", "roberta")
    hf.to(torch.bfloat16).save_pretrained(str(tmp_path / "bf16"))
    _, masked_lm = loaded(tmp_path / "bf16")
    ours, theirs = logits(masked_lm, hf.to(torch.bfloat16).float(), "roberta", pad_id=1)
    assert np.abs(ours - theirs).max() <= TOLERANCE


def test_transformers_tokenizer_folders_load_as_ours(tmp_path):
    """A `save_pretrained` RoBERTa / BERT tokenizer folder is what prepare's and the trainer's
    --tokenizer read (common/tokenizer_files.load)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from common import tokenizer_files

    styles = {
        "roberta": ("<s>", "<pad>", "</s>", "<unk>", "<mask>"),
        "bert": ("[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"),
    }
    for family, (cls, pad, sep, unk, mask) in styles.items():
        vocab = {t: i for i, t in enumerate([cls, pad, sep, unk, mask] + ["a", "b"])}
        tok = Tokenizer(models.WordLevel(vocab, unk_token=unk))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        fast = transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok,
            cls_token=cls,
            pad_token=pad,
            sep_token=sep,
            unk_token=unk,
            mask_token=mask,
        )
        fast.save_pretrained(str(tmp_path / family))
        _, info = tokenizer_files.load(str(tmp_path / family))
        assert info.special_token_ids == {
            "cls_token": 0,
            "sep_token": 2,
            "pad_token": 1,
            "unk_token": 3,
            "mask_token": 4,
        }, family


# --- the trainer (one training run, TensorFlow only) ---------------------------------------


def _args(corpus, out, init, *extra):
    args = task_args(corpus, out, "--init_from", str(init), *extra)
    cut = args.index("--config")
    return args[:cut] + args[cut + 2 :]  # --config is refused with --init_from


def _one_line_error(capsys, code) -> str:
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def test_refuses_data_of_another_tokenizer(corpus, tmp_path, capsys):
    from trainer.pretraining import task

    hf_checkpoint(tmp_path / "ckpt", "roberta", pad_id=0)
    other = make_tokenizer(tmp_path / "ckpt")  # same words, another file: differs by its
    data = json.loads((tmp_path / "ckpt" / "tokenizer.json").read_text())  # pre-tokenizer
    data["pre_tokenizer"] = {"type": "WhitespaceSplit"}
    (tmp_path / "ckpt" / "tokenizer.json").write_text(json.dumps(data))
    assert other.vocab_size == VOCAB
    capsys.readouterr()  # save_pretrained's progress bar
    err = _one_line_error(
        capsys, task.main(_args(corpus, tmp_path / "out", tmp_path / "ckpt", "--train_steps", "1"))
    )
    assert "is not the one" in err and "--tokenizer" in err
    assert not (tmp_path / "out" / "run_config.json").exists()


def test_refuses_sequences_longer_than_the_checkpoint_positions(corpus, tmp_path, capsys):
    from trainer.pretraining import task

    hf_checkpoint(tmp_path / "ckpt", "roberta", pad_id=0, positions=SEQ_LEN - 8, tokenizer=True)
    capsys.readouterr()
    err = _one_line_error(
        capsys, task.main(_args(corpus, tmp_path / "out", tmp_path / "ckpt", "--train_steps", "1"))
    )
    assert f"have {SEQ_LEN} tokens" in err and f"positions for {SEQ_LEN - 8}" in err
    assert "reserves for pad_id + 1" in err


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax", reason="one training run, on the TensorFlow pass only"
)
def test_continued_run_starts_at_the_checkpoint_loss_and_restarts_as_a_run(
    corpus, tmp_path, capsys, monkeypatch
):
    """Continue a short run's HF export: the first evaluation is at the exported model's loss
    (not chance), run_config records the checkpoint, a restart resumes the run (the checkpoint
    is not loaded again) and a restart with another --init_from is refused."""
    from trainer.pretraining import task

    # 120 steps: past the plateau on every seed tried (eval loss 3.0-3.9 over seeds 1, 2, 3,
    # 42), where 40 steps end anywhere in 4.2-4.6, some at chance (log 100 = 4.61).
    steps = [
        "--train_steps",
        "120",
        "--eval_every",
        "120",
        "--save_every",
        "120",
        "--max_eval_batches",
        "4",
    ]
    assert task.main(task_args(corpus, tmp_path / "source", *steps)) == 0
    source = json.loads((tmp_path / "source" / "metrics.json").read_text())["eval_loss"]
    hf = export.export(str(tmp_path / "source"), str(tmp_path / "export"), "hf")["hf"]
    out, steps = (
        tmp_path / "continued",
        ["--train_steps", "1", "--learning_rate", "1e-9", "--max_eval_batches", "4"],
    )
    assert task.main(_args(corpus, out, hf, *steps)) == 0
    first = json.loads((out / "history.json").read_text())[0]["eval_loss"]
    print(
        f"source eval loss {source:.4f}, continued first eval {first:.4f}, "
        f"chance {math.log(VOCAB):.2f}"
    )
    assert abs(first - source) < 0.01 and first < math.log(VOCAB) - 0.2
    recorded = json.loads((out / "run_config.json").read_text())["init_from"]
    assert recorded["kind"] == "hf" and len(recorded["digest"]) == 64
    monkeypatch.setattr(init_from, "load_into", lambda *a: pytest.fail("reloaded the model"))
    assert task.main(_args(corpus, out, hf, *steps)) == 0  # finished: resumed, not reloaded
    capsys.readouterr()
    err = _one_line_error(capsys, task.main(_args(corpus, out, tmp_path / "source", *steps)))
    assert "another init_from" in err and "--init_from" in err


def test_model_card_says_what_the_model_was_continued_from():
    from trainer.release import card_text

    initial = {"path": "ckpt/hf", "kind": "hf", "digest": "ab" * 32}
    origin = card_text._origin(saved_run(init_from=initial, train_data="data/train"))
    assert "continued from `ckpt/hf`" in origin and "abab" in origin and "data/train" in origin
    assert card_text._origin(saved_run(init_from=None)) == "pretrained from scratch"


@pytest.mark.parametrize("layout", ["run", "preset"])
def test_our_run_folder_and_preset_load_exactly(tmp_path, layout):
    from tests.trainer.models.test_checkpoints import assert_same_weights, make_training_dir

    run_dir, trained = make_training_dir(str(tmp_path), "bert")
    path = (
        run_dir
        if layout == "run"
        else export.export(run_dir, str(tmp_path / "export"), "all")["keras-hub"]
    )
    initial = init_from.resolve(path if layout == "run" else str(tmp_path / "export"))
    assert initial.kind == {"run": "checkpoint", "preset": "preset"}[layout]
    assert initial.tokenizer is not None and initial.family.name == "bert"
    masked_lm = model.build_masked_lm(initial.family, initial.backbone_config)
    init_from.load_into(masked_lm, initial)
    assert_same_weights(masked_lm, trained)


# --- BERT with the exact GELU (bert-base-uncased's hidden_act "gelu") -----------------------


def exact_gelu_in_every_layer(backbone) -> bool:
    """gelu(1) is 0.841345 exactly, 0.841192 with the tanh formula."""
    one = np.ones(1, "float32")
    values = [
        float(np.asarray(layer._feedforward_intermediate_dense.activation(one))[0])
        for layer in backbone.transformer_layers
    ]
    return all(abs(v - 0.841345) < 1e-5 for v in values)


def keras_hub_head(hf):
    """HF BERT's MLM head set like keras-hub's (exact GELU, epsilon 1e-5): every other weight
    and setting is then compared exactly (see test_bert_logits_match_transformers_after_load)."""
    transform = hf.cls.predictions.transform
    transform.transform_act_fn, transform.LayerNorm.eps = torch.nn.GELU(), 1e-5
    return hf


def test_bert_with_the_exact_gelu_loads_with_logit_parity(tmp_path):
    hf = keras_hub_head(hf_checkpoint(tmp_path, "bert", pad_id=0, hidden_act="gelu"))
    initial, masked_lm = loaded(tmp_path)
    assert initial.backbone_config["activation"] == "gelu"
    assert exact_gelu_in_every_layer(masked_lm.backbone)
    ours, theirs = logits(masked_lm, hf, "bert", pad_id=0)
    diff = np.abs(ours - theirs).max()
    # What refusing the checkpoint avoided: the same weights under keras-hub's tanh GELU.
    tanh = model.build_masked_lm(initial.family, {**initial.backbone_config, "activation": None})
    tanh.set_weights(masked_lm.get_weights())
    approximate, _ = logits(tanh, hf, "bert", pad_id=0)
    print(
        f"bert exact GELU: max abs logit difference {diff:.2e}; with the tanh GELU on the "
        f"same weights {np.abs(approximate - theirs).max():.2e}"
    )
    assert diff <= TOLERANCE
    assert not exact_gelu_in_every_layer(tanh.backbone)


def test_bert_with_the_exact_gelu_exports_back_as_gelu(tmp_path):
    """The export's config says hidden_act "gelu" and transformers computes our logits."""
    from common import tokenizer_files

    hf_checkpoint(tmp_path, "bert", pad_id=0, hidden_act="gelu", canonical=True)
    initial, masked_lm = loaded(tmp_path)
    ids = {"pad_token": 0, "cls_token": None, "sep_token": None}
    info = tokenizer_files.TokenizerInfo("f" * 64, VOCAB, ids)
    config = export.hf_config(initial.family, initial.backbone_config, info)
    assert config.hidden_act == "gelu"
    again = transformers.BertForMaskedLM(config).eval()
    state = export.hf_state_dict(masked_lm, initial.family, 0)
    again.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    ours, theirs = logits(masked_lm, keras_hub_head(again), "bert", pad_id=0)
    assert np.abs(ours - theirs).max() <= TOLERANCE


@pytest.mark.parametrize("hidden_act", ["gelu_pytorch_tanh", "gelu_new"])
def test_tanh_gelu_names_load_as_keras_hubs_default(tmp_path, hidden_act):
    hf = keras_hub_head(hf_checkpoint(tmp_path, "bert", pad_id=0, hidden_act=hidden_act))
    initial, masked_lm = loaded(tmp_path)
    assert "activation" not in initial.backbone_config  # keras-hub's own BERT, unchanged
    assert not exact_gelu_in_every_layer(masked_lm.backbone)
    ours, theirs = logits(masked_lm, hf, "bert", pad_id=0)
    assert np.abs(ours - theirs).max() <= TOLERANCE


def test_exact_gelu_is_rebuilt_by_every_loader_and_refused_as_a_preset(tmp_path):
    """A run recording activation "gelu" (what --init_from of such a checkpoint writes) is
    rebuilt with it by the checkpoint loader (restarts, predict, export) and fine-tuning;
    the keras-hub preset, which keras-hub rebuilds with its tanh GELU, is refused."""
    from common import fs
    from tests.trainer.models.test_checkpoints import make_training_dir
    from trainer.finetuning.classifier import PretrainedBackbone
    from trainer.models import model_source

    run_dir, _ = make_training_dir(str(tmp_path), "bert")
    config = fs.read_json(f"{run_dir}/run_config.json")
    config["backbone_config"]["activation"] = "gelu"
    fs.write_json(f"{run_dir}/run_config.json", config)
    masked_lm, _, _ = model_source.load_masked_lm(run_dir)
    assert exact_gelu_in_every_layer(masked_lm.backbone)
    classifier = PretrainedBackbone(model_source.resolve(run_dir)).classifier(2, seed=1)
    assert exact_gelu_in_every_layer(classifier.backbone)
    for fmt in ("keras-hub", "all"):
        with pytest.raises(export.ExportError, match="--format hf") as caught:
            export.export(run_dir, str(tmp_path / fmt), fmt)
        assert "\n" not in str(caught.value) and not (tmp_path / fmt).exists()
    hf = export.export(run_dir, str(tmp_path / "hf"), "hf")["hf"]
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["hidden_act"] == "gelu"
    assert "feed-forward activation | gelu" in (tmp_path / "hf" / "README.md").read_text()
    assert hf == str(tmp_path / "hf")


# --- a Hub id: recorded as the repo and its commit, not the download folder -------------------


def fake_hub_cache(root, repo_id, family="roberta") -> str:
    """huggingface_hub's cache layout (models--ORG--NAME/snapshots/SHA + refs/main) holding a
    tiny checkpoint: snapshot_download resolves it offline. Returns the commit."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    storage = root / ("models--" + repo_id.replace("/", "--"))
    hf_checkpoint(storage / "snapshots" / sha, family, pad_id=0)
    (storage / "refs").mkdir()
    (storage / "refs" / "main").write_text(sha)
    return sha


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    import huggingface_hub

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub read both when it was imported: set them where it reads them.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache


def test_a_hub_id_is_recorded_as_the_repo_and_its_commit(offline_hub):
    from trainer.release import card_text

    sha = fake_hub_cache(offline_hub, "org/tiny-roberta")
    initial = init_from.resolve("org/tiny-roberta")
    assert initial.path.endswith(f"snapshots/{sha}")  # where the weights are read from
    recorded = initial.record()
    assert recorded["path"] == "org/tiny-roberta" and recorded["revision"] == sha
    assert len(recorded["digest"]) == 64 and recorded["kind"] == "hf"
    origin = card_text._origin(saved_run(init_from=recorded, train_data="data/train"))
    assert f"continued from `org/tiny-roberta` @ `{sha}`" in origin


# --- keras-hub presets: another trainer's folder, names through the kagglehub cache ---------

# Case folding beyond lowercasing too (keras-hub folds ß to ss and the ligature ﬁ to fi).
PRESET_TEXTS = [
    "The quick fox jumped.",
    "the THE quick, café foxes",
    "a quick <mask> fox",
    "Straße ﬁ",
]


def keras_hub_preset(folder, family, head=True):
    """A tiny keras-hub MaskedLM with its own tokenizer (byte-level BPE with merges for
    RoBERTa, lowercasing WordPiece for BERT), saved with keras-hub's `save_to_preset`;
    `head=False` saves the backbone alone, as keras-hub's own presets are."""
    import keras
    import keras_hub
    from tokenizers import pre_tokenizers

    keras.utils.set_random_seed(3)
    size = dict(num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
    if family == "roberta":
        merges = ["Ġ q", "u i", "c k", "ui ck", "Ġq uick", "Ġ f", "o x", "Ġf ox", "t h", "th e"]
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        vocab = {t: i for i, t in enumerate(specials + sorted(pre_tokenizers.ByteLevel.alphabet()))}
        for merge in merges:
            vocab.setdefault(merge.replace(" ", ""), len(vocab))
        tokenizer = keras_hub.models.RobertaTokenizer(vocabulary=vocab, merges=merges)
        preprocessor = keras_hub.models.RobertaMaskedLMPreprocessor(tokenizer, sequence_length=16)
        backbone = keras_hub.models.RobertaBackbone(
            vocabulary_size=len(vocab), max_sequence_length=16, **size
        )
    else:
        words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "fox", "##es"]
        words += ["jump", "##ed", ".", ",", "café", "strasse", "fi"]
        tokenizer = keras_hub.models.BertTokenizer(vocabulary=words, lowercase=True)
        preprocessor = keras_hub.models.BertMaskedLMPreprocessor(tokenizer, sequence_length=16)
        backbone = keras_hub.models.BertBackbone(
            vocabulary_size=len(words), max_sequence_length=16, **size
        )
    masked_lm = getattr(keras_hub.models, f"{family.capitalize()}MaskedLM")(
        backbone, preprocessor=preprocessor
    )
    for variable in masked_lm.weights:  # noised: no test passes on initial values
        variable.assign(variable.numpy() + np.random.default_rng(1).normal(0, 0.1, variable.shape))
    (masked_lm if head else backbone).save_to_preset(str(folder))
    return masked_lm, tokenizer


@pytest.mark.parametrize("family", ["roberta", "bert"])
def test_a_keras_hub_preset_of_another_trainer_loads_with_its_tokenizer(tmp_path, family):
    """Weights exactly, and keras-hub's tokenizer assets as a tokenizer folder that prepare
    reads, giving keras-hub's ids (and the fingerprint the trainer checks the data against)."""
    from common import tokenizer_files
    from tests.trainer.models.test_checkpoints import assert_same_weights
    from trainer.models import keras_hub_presets

    original, keras_tokenizer = keras_hub_preset(tmp_path / "preset", family)
    initial, masked_lm = loaded(tmp_path / "preset")
    assert (initial.kind, initial.family.name) == ("preset", family)
    assert_same_weights(masked_lm, original)
    args = ["--preset", str(tmp_path / "preset"), "--output_dir", str(tmp_path / "tok")]
    assert keras_hub_presets.main(args) == 0
    tokenizer, info = tokenizer_files.load(str(tmp_path / "tok"))
    assert info == initial.tokenizer and initial.pad_id == info.pad_id
    for text in PRESET_TEXTS:
        theirs = np.asarray(keras_tokenizer(text)).tolist()
        assert tokenizer.encode(text, add_special_tokens=False).ids == theirs, text
    with_specials = tokenizer.encode(PRESET_TEXTS[0]).ids  # prepare adds cls/sep with it
    assert (with_specials[0], with_specials[-1]) == (
        info.special_token_ids["cls_token"],
        info.special_token_ids["sep_token"],
    )


@pytest.fixture
def kagglehub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KAGGLEHUB_CACHE", str(tmp_path / "kagglehub"))
    return tmp_path / "kagglehub"


def cache_preset(handle: str, family: str) -> None:
    """Puts a preset where kagglehub's completed download of `handle` would be."""
    from kagglehub.cache import Cache
    from kagglehub.handle import parse_model_handle

    parsed = parse_model_handle(handle)
    keras_hub_preset(Cache().get_path(parsed), family)
    Cache().mark_as_complete(parsed)


def test_a_preset_name_is_read_from_the_kagglehub_cache_offline(kagglehub_cache):
    """keras-hub's names carry their Kaggle version, so a cached download needs no network."""
    cache_preset("keras/roberta/keras/roberta_base_en/3", "roberta")  # a tiny stand-in
    initial = init_from.resolve("roberta_base_en")
    assert initial.family.name == "roberta" and initial.tokenizer is not None
    assert initial.record()["path"] == "roberta_base_en" and initial.record()["revision"] == "3"
    cache_preset("someone/tiny/keras/tiny_bert/2", "bert")
    initial = init_from.resolve("kaggle://someone/tiny/keras/tiny_bert/2")
    assert initial.family.name == "bert" and initial.record()["revision"] == "2"


def test_a_preset_name_not_cached_offline_is_one_line(kagglehub_cache):
    with pytest.raises(UserError, match="not in the kagglehub cache") as caught:
        init_from.resolve("bert_base_en_uncased")
    assert "\n" not in str(caught.value)


def test_a_preset_without_a_masked_lm_head_is_refused(tmp_path):
    """keras-hub would build the MaskedLM with a random head: a partial load."""
    keras_hub_preset(tmp_path, "roberta", head=False)
    with pytest.raises(init_from.InitFromError, match="without a masked-LM head") as caught:
        init_from.resolve(str(tmp_path))
    assert "FacebookAI/roberta-base" in str(caught.value) and "\n" not in str(caught.value)


# --- several devices -------------------------------------------------------------------------


def _train(args, replicas: str) -> None:
    """In this process, but TensorFlow's two replicas in a fresh one: collectives of earlier
    MirroredStrategy runs in this worker clash with a new one's (test_finetune_replicas.py)."""
    from trainer.pretraining import task

    if replicas == "1" or os.environ.get("KERAS_BACKEND") == "jax":
        assert task.main(args) == 0
        return
    run = subprocess.run(
        [sys.executable, "-m", "trainer.task", *args], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.mark.slow
def test_init_from_on_two_replicas_starts_at_the_checkpoint_loss(corpus, tmp_path):
    """Each replica holds the checkpoint's weights (JAX DataParallel over conftest's 2 CPU
    devices; TensorFlow MirroredStrategy over 2 logical CPUs): the weights a two-replica run
    saved after one step at learning rate 1e-9 are the checkpoint's, and its first
    evaluation is the one-device run's (same eval masks)."""
    import keras

    from trainer.models import model_source

    hf_checkpoint(tmp_path / "ckpt", "roberta", pad_id=0, tokenizer=True)
    steps = ["--train_steps", "1", "--learning_rate", "1e-9", "--max_eval_batches", "4"]
    first = {}
    try:
        for replicas in ("1", "2"):
            out = tmp_path / f"out{replicas}"
            args = _args(corpus, out, tmp_path / "ckpt", *steps, "--cpu_replicas", replicas)
            if replicas == "2":
                args[args.index("--per_replica_batch_size") + 1] = "8"  # global batch 16
            _train(args, replicas)
            assert json.loads((out / "run_config.json").read_text())["replicas"] == int(replicas)
            first[replicas] = json.loads((out / "history.json").read_text())[0]["eval_loss"]
    finally:
        if keras.backend.backend() == "jax":
            keras.distribution.set_distribution(None)  # Keras' process-wide state
    print(f"first eval loss: 1 device {first['1']:.5f}, 2 replicas {first['2']:.5f}")
    saved = model_source.load_masked_lm(str(tmp_path / "out2"))[0]
    _, checkpoint = loaded(tmp_path / "ckpt")
    worst = max(
        float(np.max(np.abs(a - b))) for a, b in zip(saved.get_weights(), checkpoint.get_weights())
    )
    assert worst < 1e-5, worst
    # The same tokens and masks: the same token-weighted loss on every backend (before, Keras'
    # loss tracker under MirroredStrategy read 3.78-4.20 here against 4.73 on one device).
    assert first["2"] == pytest.approx(first["1"], abs=1e-4)
