"""trainer/run_folder/run_record.py: run_config.json files written by the trainer before the
record existed (tests/trainer/fixtures/, from real 2-step runs) read into the right fields and
written back byte for byte; folders older than `size`; the one max_sequence_length rule."""

import json
import pathlib

import pytest

from common import fs
from trainer.run_folder.attempts import AttemptRecipe
from trainer.run_folder.run_record import FROM_INIT, RunRecord, RunRecordError

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def _fixture(name: str) -> pathlib.Path:
    return FIXTURES / f"run_config_{name}.json"


@pytest.mark.parametrize("name", ["roberta", "modernbert", "init_from"])
def test_a_saved_run_config_reads_and_writes_back_the_same_bytes(name, tmp_path):
    record = RunRecord.read(str(_fixture(name)))
    saved = json.loads(_fixture(name).read_text())
    assert record.to_dict() == saved and record.raw == saved
    assert record.to_dict() is not record.raw  # a copy: the record stays as read
    record.write(str(tmp_path / "run_config.json"))
    assert (tmp_path / "run_config.json").read_bytes() == _fixture(name).read_bytes()
    fs.write_json(str(tmp_path / "direct.json"), record.to_dict())  # what the writer did
    assert (tmp_path / "direct.json").read_bytes() == _fixture(name).read_bytes()


def test_the_fields_of_a_run_from_scratch():
    record = RunRecord.read(str(_fixture("roberta")))
    assert record.family.name == "roberta" and record.size == "tiny"
    assert record.backbone_config["hidden_dim"] == 64 and record.max_length == 32
    assert record.tokenizer["vocab_size"] == 100 and len(record.tokenizer["fingerprint"]) == 64
    assert record.init_from is None and record.exported_from is None
    assert (record.seed, record.eval_seed) == (42, 1234)
    assert (record.masking, record.mlm_probability) == ("token", 0.15)
    assert record.train_data == "runs/fixture/train" and record.eval_data == "runs/fixture/eval"
    assert len(record.train_data_digest) == 64
    assert (record.input_pipelines, record.max_eval_batches) == (1, 1)
    recipe = record.recipe
    assert (recipe.learning_rate, recipe.total_steps, recipe.warmup_steps) == (0.01, 2, 0)
    assert (recipe.global_batch_size, recipe.schedule, recipe.data_start_step) == (16, "linear", 0)
    assert len(record.attempts) == 1 and AttemptRecipe.of(record.attempts[0]).start_step == 0
    assert record.flag("shuffle_buffer_size") == 65536 and record.flag("no_such_flag") is None


def test_after_init_from_the_size_is_none_not_the_model_flags_default():
    saved = json.loads(_fixture("init_from").read_text())
    assert (saved["model"], saved["size"]) == ("base", FROM_INIT)  # what the dict says
    record = RunRecord.from_dict(saved)
    assert record.size is None and record.family.name == "roberta"
    assert record.init_from["kind"] == "checkpoint" and len(record.init_from["digest"]) == 64


def test_an_old_folder_with_model_and_no_size_still_reads():
    saved = json.loads(_fixture("roberta").read_text())
    del saved["size"], saved["attempts"]
    record = RunRecord.from_dict(saved)
    assert record.size == "tiny" and record.attempts == ()
    assert record.to_dict() == saved


def test_max_sequence_length_is_the_position_table_else_the_trained_length():
    roberta = json.loads(_fixture("roberta").read_text())
    modernbert = json.loads(_fixture("modernbert").read_text())
    # The table's length and the trained length differ here, so each rule is seen.
    for saved in (roberta, modernbert):
        saved["backbone_config"]["max_sequence_length"], saved["max_length"] = 64, 16
    assert RunRecord.from_dict(roberta).max_sequence_length == 64  # absolute: the table
    assert RunRecord.from_dict(modernbert).max_sequence_length == 16  # rotary: trained length


def test_an_export_names_its_weights_and_a_record_without_a_family_is_one_line():
    record = RunRecord.read(str(_fixture("roberta")))
    exported = record.exported("runs/r/checkpoints/ckpt-00000002.weights.h5")
    assert exported.exported_from.endswith("ckpt-00000002.weights.h5")
    assert exported.raw["exported_from"] == exported.exported_from and record.exported_from is None
    with pytest.raises(RunRecordError, match="records its family"):
        RunRecord.from_dict({"backbone_config": {}})
    with pytest.raises(RunRecordError, match="'gpt' is not one of"):
        RunRecord.from_dict({"family": "gpt", "backbone_config": {}})
