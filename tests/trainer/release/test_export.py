"""Export round trips: keras-hub preset back into keras-hub, HF folder into transformers (torch).

The HF model must give the Keras model's logits at every non-pad position, with no missing or
unexpected keys, and `pipeline("fill-mask")` must pick the same top token as trainer.predict.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from common import fs, tokenizer_files
from common.errors import Terminated
from tests.trainer.models.test_checkpoints import MAX_LENGTH, make_training_dir
from trainer.models import model_source
from trainer.release import export, predict

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

FAMILIES = ("roberta", "bert")
TOLERANCE = 1e-4
# keras-hub's BertMaskedLM head uses the exact GELU and LayerNorm epsilon 1e-5 while its
# layers use the tanh GELU and 1e-12; HF BERT has one `hidden_act` and one `layer_norm_eps`
# for both, so the exported head is approximate. Measured ~5e-4 here (weights noise 0.1).
BERT_SHIPPED_TOLERANCE = 5e-3
FILL_MASK_TEXT = {"roberta": "The cat <mask> on the mat.", "bert": "the cat [MASK] on the mat."}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """family -> dict(run=output_dir, keras=trained MaskedLM, paths={format: dir},
    hf=torch model)."""
    root = str(tmp_path_factory.mktemp("export"))
    result = {}
    for family in FAMILIES:
        run_dir, masked_lm = make_training_dir(root, family)
        paths = export.export(run_dir, os.path.join(root, f"export-{family}"), "all")
        hf_model, loading_info = transformers.AutoModelForMaskedLM.from_pretrained(
            paths["hf"], output_loading_info=True
        )
        result[family] = dict(
            run=run_dir, keras=masked_lm, paths=paths, hf=hf_model.eval(), loading_info=loading_info
        )
    return result


def sample_batch(family, pad_id, vocab_size, seed=0):
    """Three rows: full max length (last position id), right-padded, short unpadded prefix."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, vocab_size, (3, MAX_LENGTH)).astype(np.int32)
    padding_mask = np.ones_like(token_ids)
    token_ids[1, 20:], padding_mask[1, 20:] = pad_id, 0
    token_ids[2, 9:], padding_mask[2, 9:] = pad_id, 0
    inputs = {
        "token_ids": token_ids,
        "padding_mask": padding_mask,
        "mask_positions": np.tile(np.arange(MAX_LENGTH, dtype=np.int32), (3, 1)),
    }
    if family == "bert":
        inputs["segment_ids"] = np.zeros_like(token_ids)
    return inputs


def keras_and_hf_logits(case, family):
    hf = case["hf"]
    inputs = sample_batch(family, hf.config.pad_token_id, hf.config.vocab_size)
    keras_logits = np.asarray(case["keras"](inputs, training=False))
    with torch.no_grad():
        hf_logits = hf(
            input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
            attention_mask=torch.tensor(inputs["padding_mask"]),
        ).logits.numpy()
    valid = inputs["padding_mask"].astype(bool)  # pad positions are nobody's output
    return keras_logits[valid], hf_logits[valid]


@pytest.mark.parametrize("family", FAMILIES)
def test_keras_hub_preset_round_trip(exported, family):
    import keras_hub

    case = exported[family]
    preset = case["paths"]["keras-hub"]
    reloaded = keras_hub.models.MaskedLM.from_preset(preset)
    assert type(reloaded) is type(case["keras"])
    inputs = sample_batch(family, 1, reloaded.backbone.vocabulary_size)
    np.testing.assert_array_equal(
        np.asarray(reloaded(inputs, training=False)),
        np.asarray(case["keras"](inputs, training=False)),
    )
    # Our loader takes the preset too, with the run config and tokenizer we put in it.
    _, record, tokenizer_dir = model_source.load_masked_lm(preset)
    assert record.family.name == family and record.max_length == MAX_LENGTH
    assert record.exported_from == model_source.resolve(case["run"]).path
    assert tokenizer_dir == os.path.join(preset, "tokenizer")


@pytest.mark.parametrize("family", FAMILIES)
def test_hf_folder_loads_every_weight(exported, family):
    case = exported[family]
    info = case["loading_info"]
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert not info["mismatched_keys"] and not info["error_msgs"]
    assert (
        type(case["hf"]).__name__
        == {"roberta": "RobertaForMaskedLM", "bert": "BertForMaskedLM"}[family]
    )
    files = set(os.listdir(case["paths"]["hf"]))
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= files
    assert not any(f.endswith((".bin", ".pt", ".pkl", ".h5")) for f in files)
    # The decoder is tied to the word embeddings, not a copy.
    hf = case["hf"]
    assert (
        hf.get_output_embeddings().weight.data_ptr() == hf.get_input_embeddings().weight.data_ptr()
    )


def test_roberta_position_ids_follow_pad_id(exported):
    config = exported["roberta"]["hf"].config
    _, info = tokenizer_files.load(os.path.join(exported["roberta"]["run"], "tokenizer"))
    assert config.pad_token_id == info.pad_id == 1
    assert config.max_position_embeddings == MAX_LENGTH + info.pad_id + 1
    assert config.layer_norm_eps == 1e-5


def test_roberta_logits_match(exported):
    keras_logits, hf_logits = keras_and_hf_logits(exported["roberta"], "roberta")
    diff = np.abs(keras_logits - hf_logits).max()
    print(f"roberta max abs logit difference: {diff:.2e}")
    assert diff <= TOLERANCE


def test_bert_logits_match_with_keras_hub_head(exported):
    """Every BERT weight is mapped exactly: with HF's head set like keras-hub's, logits agree."""
    case = exported["bert"]
    transform = case["hf"].cls.predictions.transform
    shipped = transform.transform_act_fn, transform.LayerNorm.eps
    transform.transform_act_fn, transform.LayerNorm.eps = torch.nn.GELU(), 1e-5
    try:
        keras_logits, hf_logits = keras_and_hf_logits(case, "bert")
    finally:
        transform.transform_act_fn, transform.LayerNorm.eps = shipped
    diff = np.abs(keras_logits - hf_logits).max()
    print(f"bert max abs logit difference (keras-hub head settings): {diff:.2e}")
    assert diff <= TOLERANCE


def test_bert_logits_close_as_shipped(exported):
    keras_logits, hf_logits = keras_and_hf_logits(exported["bert"], "bert")
    diff = np.abs(keras_logits - hf_logits).max()
    print(f"bert max abs logit difference (as shipped): {diff:.2e}")
    assert diff <= BERT_SHIPPED_TOLERANCE
    # Same top token wherever the top two are further apart than the tolerance.
    top2 = np.sort(keras_logits, -1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * BERT_SHIPPED_TOLERANCE
    assert clear.mean() > 0.5
    np.testing.assert_array_equal(keras_logits.argmax(-1)[clear], hf_logits.argmax(-1)[clear])


@pytest.mark.parametrize("family", FAMILIES)
def test_fill_mask_pipeline_agrees_with_predict(exported, family):
    case = exported[family]
    fill_mask = transformers.pipeline("fill-mask", model=case["paths"]["hf"], top_k=3)
    hf_top = fill_mask(FILL_MASK_TEXT[family])
    ours = predict.MaskPredictor(case["paths"]["keras-hub"]).predict(
        [FILL_MASK_TEXT[family]], top_k=3
    )[0][0]
    assert hf_top[0]["token_str"].strip() == ours[0][0].strip()
    np.testing.assert_allclose([c["score"] for c in hf_top], [s for _, s in ours], atol=1e-3)


def test_hf_export_from_the_preset_is_the_same(exported, tmp_path):
    """Variable paths do not depend on how the model was built (checkpoint or preset)."""
    from safetensors.numpy import load_file

    case = exported["bert"]
    again = export.export(case["paths"]["keras-hub"], str(tmp_path), "hf")["hf"]
    first = load_file(os.path.join(case["paths"]["hf"], "model.safetensors"))
    second = load_file(os.path.join(again, "model.safetensors"))
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


def test_weight_table_must_cover_the_model(exported):
    import dataclasses

    from trainer import families

    roberta = families.get("roberta")
    fewer = dataclasses.replace(roberta, weight_rows=roberta.weight_rows[:-1])
    with pytest.raises(export.ExportError, match="unlisted variables.*mlm_head/output_bias"):
        export.hf_state_dict(exported["roberta"]["keras"], fewer, pad_id=1)


def test_refuses_a_tokenizer_that_is_not_the_trained_one(exported):
    import dataclasses

    source = model_source.resolve(exported["roberta"]["run"])
    record = dataclasses.replace(source.record, tokenizer={"fingerprint": "0" * 64})
    with pytest.raises(export.ExportError, match="not the tokenizer the model was trained with"):
        export._tokenizer_info(dataclasses.replace(source, record=record))


def test_cli_errors_are_one_line(tmp_path, capsys):
    code = export.main(
        ["--checkpoint", str(tmp_path), "--output_dir", str(tmp_path / "out"), "--format", "hf"]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err


def test_hf_folder_is_not_taken_for_a_preset(exported):
    with pytest.raises(model_source.ModelNotFoundError, match="Hugging Face"):
        model_source.resolve(exported["roberta"]["paths"]["hf"])


def _tree(folder):
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in Path(folder).rglob("*") if p.is_file()
    }


def _leftovers(parent):
    return [p.name for p in Path(parent).iterdir() if p.name.startswith(fs.TEMP_PREFIX)]


@pytest.mark.parametrize(
    "fault",
    [OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), Terminated("stopped by signal SIGTERM")],
)
def test_a_failed_re_export_leaves_the_previous_export_whole(
    exported, tmp_path, monkeypatch, capsys, fault
):
    """The model card is the last file written: a full disk (or a SIGTERM) there used to
    leave the new weights beside the old card. Now the export is staged and swapped in."""
    out = tmp_path / "exp"
    run = exported["roberta"]["run"]
    assert export.main(["--checkpoint", run, "--output_dir", str(out), "--format", "all"]) == 0
    before = _tree(out)

    def fail(card, folder):
        raise fault

    monkeypatch.setattr(export.model_card, "write", fail)
    capsys.readouterr()
    code = export.main(["--checkpoint", run, "--output_dir", str(out), "--format", "hf"])
    assert code == (2 if isinstance(fault, OSError) else 143)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert _tree(out) == before and _leftovers(tmp_path) == []


def test_a_failed_first_export_leaves_no_folder(exported, tmp_path, monkeypatch, capsys):
    """A disk-full first export used to leave a preset with an empty tokenizer/ and no card
    that keras-hub loads (and a later --push_to could publish)."""
    out = tmp_path / "exp"

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out / "tokenizer" / "x"))

    monkeypatch.setattr(export.tokenizer_files, "copy", full_disk)
    assert (
        export.main(
            [
                "--checkpoint",
                exported["roberta"]["run"],
                "--output_dir",
                str(out),
                "--format",
                "keras-hub",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no space left on device" in err[0], err
    assert not out.exists() and _leftovers(tmp_path) == []


def test_a_re_export_replaces_the_previous_one_whole(exported, tmp_path):
    out = tmp_path / "exp"
    run = exported["roberta"]["run"]
    export.export(run, str(out), "all")
    paths = export.export(run, str(out), "hf")
    assert paths == {"hf": str(out)} and not (out / "keras-hub").exists()
    assert (out / export.HF_CONFIG).exists() and _leftovers(tmp_path) == []


def test_an_export_refuses_a_folder_that_holds_something_else(exported, tmp_path, capsys):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("mine")
    assert (
        export.main(
            ["--checkpoint", exported["roberta"]["run"], "--output_dir", str(out), "--format", "hf"]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not an earlier output" in err[0], err
    assert _tree(out) == {"todo.txt": b"mine"} and _leftovers(tmp_path) == []


def _save_pretrained_folder(exported, out: Path, **extra: str) -> None:
    """What `save_pretrained` leaves (config, weights, tokenizer files; no card of ours)."""
    shutil.copytree(exported["roberta"]["paths"]["hf"], out)
    (out / "README.md").unlink()
    for name, text in extra.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)


@pytest.mark.parametrize(
    "extra, named",
    [
        ({"notes.txt": "mine"}, "notes.txt"),  # a user's file beside a transformers model
        ({}, "no model card"),  # a transformers model folder someone else saved
        ({"data/train.jsonl": "{}", "src/main.py": "pass"}, "data/train.jsonl"),  # a project
    ],
)
def test_an_export_refuses_a_config_json_folder_it_did_not_write(
    exported, tmp_path, capsys, extra, named
):
    out = tmp_path / "theirs"
    _save_pretrained_folder(exported, out, **extra)
    before = _tree(out)
    args = ["--checkpoint", exported["roberta"]["run"], "--output_dir", str(out)]
    for fmt in ("hf", "all"):
        assert export.main([*args, "--format", fmt]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not an earlier output" in err[0] and named in err[0], err
        assert _tree(out) == before and _leftovers(tmp_path) == []


def test_an_earlier_export_with_a_file_it_never_writes_is_refused_naming_it(
    exported, tmp_path, capsys
):
    out = tmp_path / "exp"
    export.export(exported["roberta"]["run"], str(out), "all")
    (out / "keras-hub" / "eval.txt").write_text("mine")
    before = _tree(out)
    args = ["--checkpoint", exported["roberta"]["run"], "--output_dir", str(out)]
    assert export.main([*args, "--format", "hf"]) == 2
    err = capsys.readouterr().err.strip()
    assert "keras-hub/eval.txt" in err and _tree(out) == before
    (out / "keras-hub" / "eval.txt").unlink()
    assert export.main([*args, "--format", "keras-hub"]) == 0  # an export replaces another
    assert (out / "run_config.json").exists() and not (out / "hf").exists()


def test_a_disk_too_small_for_the_preset_is_refused_before_h5py_writes(
    exported, tmp_path, monkeypatch, capsys
):
    """h5py on a full disk crashes the process at exit (exit 139): measure first."""
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(export.shutil, "disk_usage", lambda path: usage._replace(free=1 << 20))
    assert (
        export.main(
            [
                "--checkpoint",
                exported["roberta"]["run"],
                "--output_dir",
                str(tmp_path / "exp"),
                "--format",
                "keras-hub",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MiB are free" in err[0], err
    assert not (tmp_path / "exp").exists() and _leftovers(tmp_path) == []


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax",
    reason="the gs:// swap does not depend on the backend; one pass is enough",
)
def test_a_gcs_export_is_whole_or_nothing(exported, gcs, monkeypatch, tmp_path):
    """On gs:// (no rename): staged under a `.tmp-` prefix beside the export, then copied
    in; a failure before that leaves the earlier export's objects exactly as they were."""
    gcs.apply_env()
    run, out = exported["roberta"]["run"], gcs.url("exports", "tiny[1]")
    local = export.export(run, str(tmp_path / "local"), "all")
    assert export.export(run, out, "all") == {f: fs.join(out, f) for f in local}
    objects = {n: gcs.read_object(n) for n in gcs.object_names("exports/")}
    local_files = _tree(tmp_path / "local")
    assert sorted(n.removeprefix("exports/tiny[1]/") for n in objects) == sorted(local_files)
    assert objects["exports/tiny[1]/hf/config.json"] == local_files["hf/config.json"]

    def fail(card, folder):
        raise ConnectionError("upload failed")

    with monkeypatch.context() as patch:
        patch.setattr(export.model_card, "write", fail)
        with pytest.raises(ConnectionError):
            export.export(run, out, "hf")
    assert {n: gcs.read_object(n) for n in gcs.object_names("exports/")} == objects
    export.export(run, out, "hf")
    names = gcs.object_names("exports/")
    assert "exports/tiny[1]/config.json" in names and not any("keras-hub" in n for n in names)
    assert not any(fs.TEMP_PREFIX in n for n in names)


def test_an_export_refuses_a_run_folder_that_holds_an_export_deeper_down(
    exported, tmp_path, capsys
):
    """The trainer exports into RUN/export/: that `config.json` does not make RUN an export
    (it would have been replaced whole, checkpoints and all)."""
    run = tmp_path / "run"
    shutil.copytree(exported["roberta"]["run"], run)
    export.export(str(run), str(run / "export"), "all")
    before = _tree(run)
    assert export.main(["--checkpoint", str(run), "--output_dir", str(run), "--format", "hf"]) == 2
    assert "not an earlier output" in capsys.readouterr().err
    assert _tree(run) == before


# transformers' names of the MLM heads our export ships, unused by a sequence classifier.
MLM_HEAD = {"roberta": ("lm_head.",), "bert": ("cls.predictions.",)}
# What a sequence classifier adds: the head (BERT's on the pooler, which the MLM loss never
# trains and the export leaves out: trainer/families/bert.py).
NEW_HEAD = {"roberta": ("classifier.",), "bert": ("classifier.", "bert.pooler.")}
# PyTorch-side checks of a folder test_hf_folder_loads_every_weight checks on both backends:
# one pass is enough (CI's budget).
TORCH_SIDE_ONCE = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") == "jax", reason="PyTorch only; run on the TensorFlow pass"
)


@pytest.mark.slow
@TORCH_SIDE_ONCE
@pytest.mark.parametrize("family", FAMILIES)
def test_hf_export_fine_tunes_in_transformers_sequence_classification(exported, family):
    """The other path users take: AutoModelForSequenceClassification on the
    export misses only the new head, keeps every encoder weight, and a few steps train it."""
    case = exported[family]
    path = case["paths"]["hf"]
    torch.manual_seed(0)
    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=3, output_loading_info=True
    )
    assert info["missing_keys"] and all(
        k.startswith(NEW_HEAD[family]) for k in info["missing_keys"]
    ), info["missing_keys"]
    assert all(k.startswith(MLM_HEAD[family]) for k in info["unexpected_keys"]), info[
        "unexpected_keys"
    ]
    assert not info["mismatched_keys"] and not info["error_msgs"]
    encoder = dict(case["hf"].base_model.named_parameters())
    for name, weight in model.base_model.named_parameters():
        if name in encoder:
            assert torch.equal(weight, encoder[name]), name
    assert set(encoder) <= dict(model.base_model.named_parameters()).keys()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    batch = tokenizer(
        ["the cat sat on the mat.", "a dog ran.", "birds fly south in winter."],
        padding=True,
        return_tensors="pt",
    )
    labels = torch.tensor([0, 1, 2])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.eval()  # dropout off: the loss of one fixed batch must fall step by step
    losses = []
    for _ in range(5):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert np.isfinite(losses).all(), losses
    assert all(later < earlier for earlier, later in zip(losses, losses[1:])), losses


def documented_snippet(doc: str, heading: str) -> str:
    """The first ```python block after `heading` in docs/`doc`."""
    text = (Path(__file__).resolve().parents[3] / "docs" / doc).read_text(encoding="utf-8")
    after = text.split(heading, 1)
    assert len(after) == 2, f"docs/{doc} has no {heading!r}"
    return after[1].split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.slow
@TORCH_SIDE_ONCE
@pytest.mark.parametrize("family", FAMILIES)
def test_documented_transformers_fine_tuning_snippet_runs(exported, family):
    """docs/export.md's snippet runs as written on our export of each family."""
    snippet = documented_snippet("export.md", "## Fine-tuning the Hugging Face export")
    assert 'path = "runs/demo/export/hf"' in snippet and len(snippet.splitlines()) <= 14
    namespace = {}
    exec(snippet.replace("runs/demo/export/hf", exported[family]["paths"]["hf"]), namespace)
    assert np.isfinite(namespace["loss"].item())
    assert type(namespace["model"]).__name__.endswith("ForSequenceClassification")
