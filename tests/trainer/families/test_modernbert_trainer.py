"""The modernbert family through the trainer's own paths: pretraining (`trainer.task
--family modernbert`), the export (both formats, read by transformers and by our package),
`--init_from` a transformers ModernBERT folder, and continued pretraining from it."""

import json

import numpy as np
import pytest

from tests.trainer.families.modernbert_data import logits_beside_transformers
from tests.trainer.mlm_data import task_args
from trainer.models import init_from, model, model_source
from trainer.pretraining import task
from trainer.release import export
from trainer.run_folder.run_dir import RunDir

pytestmark = pytest.mark.slow  # a training run and an export (~15 s per backend)

STEPS = ["--train_steps", "80", "--eval_every", "40", "--save_every", "40"]


@pytest.fixture(scope="module")
def run(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("modernbert")
    assert task.main(task_args(corpus, out / "run", "--family", "modernbert", *STEPS)) == 0
    args = ["--checkpoint", str(out / "run"), "--output_dir", str(out / "export")]
    assert export.main([*args, "--format", "all"]) == 0
    return out


def _batch(cls_id: int, pad_id: int):
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 95, (3, 32)).astype("int32")
    ids[:, 0] = cls_id  # one document per row, as a transformers user feeds it
    mask = np.ones_like(ids)
    mask[1, 20:], mask[2, 9:] = 0, 0
    ids[mask == 0] = pad_id
    return ids, mask


_logits = logits_beside_transformers


def test_pretraining_learns_and_records_the_document_separator(run, corpus):
    metrics = json.loads((run / "run" / "metrics.json").read_text())
    assert metrics["steps"] == 80 and metrics["eval_loss"] < np.log(95) - 0.5
    config = json.loads((run / "run" / "run_config.json").read_text())
    assert config["family"] == "modernbert"
    backbone = config["backbone_config"]
    assert backbone["separator_id"] == corpus["info"].special_token_ids["cls_token"]
    assert backbone["dropout"] == 0.0  # ModernBERT pretrains without dropout
    recipe = {k: config[k] for k in ("mlm_probability", "schedule", "update_clipping")}
    assert recipe == {"mlm_probability": 0.3, "schedule": "wsd", "update_clipping": "on"}


def test_export_matches_transformers_and_reloads_with_our_package(run, corpus):
    from transformers import AutoModelForMaskedLM, pipeline

    hf = AutoModelForMaskedLM.from_pretrained(str(run / "export" / "hf")).eval()
    assert type(hf).__name__ == "ModernBertForMaskedLM"
    written = json.loads((run / "export" / "hf" / "config.json").read_text())
    assert {"layer_types", "rope_parameters", "local_attention"} <= set(written)
    assert written["vocab_size"] % 64 == 0  # the vocabulary padded as ModernBERT pads it
    ours, _, _ = model_source.load_masked_lm(str(run / "export" / "keras-hub"))
    ids = corpus["info"].special_token_ids
    mine, theirs = _logits(ours, hf, *_batch(ids["cls_token"], ids["pad_token"]))
    assert np.abs(mine - theirs).max() <= 1e-4
    fill = pipeline("fill-mask", model=str(run / "export" / "hf"))
    assert len(fill(f"w1 {fill.tokenizer.mask_token} w2", top_k=3)) == 3


def test_init_from_the_transformers_export_loads_with_parity_and_continues(run, corpus):
    from transformers import AutoModelForMaskedLM

    folder = run / "export" / "hf"
    initial = init_from.resolve(str(folder))
    assert initial.family.name == "modernbert"
    masked_lm = model.build_masked_lm(initial.family, initial.backbone_config)
    init_from.load_into(masked_lm, initial)
    hf = AutoModelForMaskedLM.from_pretrained(str(folder)).eval()
    ids = corpus["info"].special_token_ids
    mine, theirs = _logits(masked_lm, hf, *_batch(ids["cls_token"], ids["pad_token"]))
    assert np.abs(mine - theirs).max() <= 1e-4
    args = task_args(corpus, run / "continued", "--init_from", str(folder), *STEPS[:2])
    cut = args.index("--config")
    assert task.main(args[:cut] + args[cut + 2 :] + ["--eval_every", "20"]) == 0
    history = json.loads((run / "continued" / "history.json").read_text())
    first = next(e["eval_loss"] for e in history if "eval_loss" in e)
    source = json.loads((run / "run" / "metrics.json").read_text())["eval_loss"]
    assert first < source + 0.3  # starts from the trained model, not from random weights


def test_sigkill_mid_interval_then_restart_matches_the_uninterrupted_run(run, corpus, tmp_path):
    """Exact resume after kill -9 (the trainer's backups; killable_run's kill points): killed
    one step after backup 40, the restart (the same command, here in this process) redoes
    step 41 from the backup and ends where the uninterrupted run ended."""
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    args = task_args(corpus, tmp_path / "run", "--family", "modernbert", *STEPS)
    killed = subprocess.run(
        [sys.executable, "-m", "tests.trainer.killable_run", "mid_interval:41", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -9, killed.stderr[-3000:]
    backups = [os.path.basename(p) for p in RunDir(str(tmp_path / "run")).backups()]
    assert backups == ["state-00000040.weights.h5"]  # step 41 trained, none since 40
    assert task.main(args) == 0
    resumed = json.loads((tmp_path / "run" / "metrics.json").read_text())
    reference = json.loads((run / "run" / "metrics.json").read_text())
    np.testing.assert_allclose(resumed["eval_loss"], reference["eval_loss"], rtol=2e-4)
    final = model_source.load_masked_lm(str(tmp_path / "run"))[0].get_weights()
    expected = model_source.load_masked_lm(str(run / "run"))[0].get_weights()
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(final, expected)) < 2e-4


def test_fine_tunes_through_trainer_finetune(run, tmp_path):
    from tests.trainer import finetune_data as fd
    from trainer.finetuning import finetune

    train = fd.write(tmp_path / "train.jsonl", fd.examples(64, 0, True, False))
    dev = fd.write(tmp_path / "dev.jsonl", fd.examples(32, 1, True, False))
    args = ["--model", str(run / "run"), "--train", train, "--dev", dev]
    args += ["--text_column", "sentence", "--text_pair_column", "second", "--seeds", "1"]
    args += ["--epochs", "6", "--learning_rate", "3e-3", "--output_dir", str(tmp_path / "out")]
    assert finetune.main(args) == 0
    found = json.loads((tmp_path / "out" / "results.json").read_text())
    assert found["model"]["family"] == "modernbert"
    epochs = found["scores"]["seeds"][0]["epochs"]
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"] - 0.1  # it learns the task
    assert max(e["dev"]["accuracy"] for e in epochs) > 0.5  # above chance (two labels)


def _literal_cls_rows(cls_id: int, pad_id: int):
    """Two rows that differ only after a cls id in mid-row (a text that quoted `[CLS]`
    before text was read as text), and a padded third."""
    ids, mask = _batch(cls_id, pad_id)
    ids[:, 12] = cls_id
    ids[1] = ids[0]
    ids[1, 13:20] = (ids[0, 13:20] - 5 + 7) % 90 + 5
    mask[1] = 1
    return ids, mask


def test_a_cls_id_inside_a_row_opens_no_document_outside_pretraining(run, corpus):
    """Audit 4, finding 3: the run records its separator (pretraining's packed rows), but the
    models built after it (predict and fine-tuning from the run, the keras-hub export) read a
    row as one document, as transformers computes the hf export."""
    from transformers import AutoModelForMaskedLM

    from trainer.finetuning.classifier import PretrainedBackbone

    hf = AutoModelForMaskedLM.from_pretrained(str(run / "export" / "hf")).eval()
    ids = corpus["info"].special_token_ids
    batch = _literal_cls_rows(ids["cls_token"], ids["pad_token"])
    for where in (run / "run", run / "export" / "keras-hub"):
        ours = model_source.load_masked_lm(str(where))[0]
        mine, theirs = _logits(ours, hf, *batch)
        assert np.abs(mine - theirs).max() <= 1e-4, where
    classifier = PretrainedBackbone(model_source.resolve(str(run / "run")), pooling="cls")
    logits = np.asarray(
        classifier.classifier(2, seed=1)({"token_ids": batch[0], "padding_mask": batch[1]})
    )
    assert np.abs(logits[0] - logits[1]).max() > 1e-6  # [CLS] sees past the literal one


def test_a_literal_control_token_in_a_text_is_tokenized_as_text(corpus):
    from common import tokenizer_files
    from trainer import families
    from trainer.finetuning.packing import Packer

    tokenizer, info = tokenizer_files.load(corpus["tokenizer"])
    cls = tokenizer.id_to_token(info.special_token_ids["cls_token"])
    mask = tokenizer.id_to_token(info.mask_id)
    packer = Packer(tokenizer, info, families.get("modernbert"), 64)
    (row,) = packer.pack([f"w1 {cls} w2 {mask} w3"]).rows
    cls_id = info.special_token_ids["cls_token"]
    assert row.count(cls_id) == 1 and row.index(cls_id) == 0 and info.mask_id not in row


def test_init_from_our_keras_hub_export_is_a_masked_lm_with_its_head(run):
    """keras-hub registers ModernBertMaskedLM under our package's name, not `keras_hub>`."""
    initial = init_from.resolve(str(run / "export" / "keras-hub"))
    assert initial.family.name == "modernbert" and initial.kind == "preset"
