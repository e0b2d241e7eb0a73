"""The family registry: one record per family, found by name, preset name or built model."""

import pytest

from trainer import families
from trainer.models import model
from trainer.models.model import backbone_config, build_masked_lm


def test_flag_choices_are_the_registered_families():
    assert set(families.NAMES) == set(families._registry())


@pytest.mark.parametrize("name", families.NAMES)
def test_a_built_model_and_its_preset_name_lead_back_to_the_record(name):
    record = families.get(name)
    config = backbone_config(
        record, "tiny", 100, 16, dict(num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32)
    )
    masked_lm = build_masked_lm(record, config)
    assert families.of_model(masked_lm) is record
    assert families.of_registered_name(record.registered_name) is record
    assert ("segment_ids" in masked_lm.input) is record.takes_segment_ids


def test_unknown_family_is_one_line():
    with pytest.raises(ValueError, match="'gpt' is not one of"):
        families.get("gpt")
    assert families.of_registered_name("keras_hub>GPT2Backbone") is None


@pytest.mark.parametrize("name", families.NAMES)
def test_every_family_answers_every_field_of_its_record(name):
    import dataclasses

    record = families.get(name)
    # None where the default is None (the shared sizes); "" only for a family that has no
    # classifier yet (fine-tuning refuses it in one line).
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if field.default is not None and field.name != "classifier_class":
            assert value is not None and value != "", f"{name} leaves {field.name} empty"
    assert record.positions in ("absolute", "rotary")
    assert 1 <= record.pair_separators <= 2
    table = record.weight_table(2)
    rows = record.layer_rows
    per_layer = [len(rows(i) if callable(rows) else rows) for i in range(2)]
    assert len(table) == len(record.weight_rows) + sum(per_layer)
    built = model.build_masked_lm(record, backbone_config(record, "tiny", 100, 16))
    assert {k for k, _, _ in record.weight_table(built.backbone.num_layers) if k} == {
        v.path for v in built.weights
    }, "the weight table must name every variable of the model"
    hf_names = {h for _, h, _ in table if h is not None}
    assert set(record.tied.values()) <= hf_names, "a tied copy must equal a tensor we write"
    assert not any(h.startswith(record.not_mlm) for h in hf_names)
    assert record.preset_tokenizer == () or record.preset_tokenizer[1] in ("bpe", "wordpiece")
    config = backbone_config(record, "tiny", 100, 16)
    assert record.max_positions(config) in (16, None)


def _string_constants(path):
    """The string literals of a module that are not docstrings."""
    import ast

    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                yield node.lineno, node.value


def test_no_family_is_named_outside_its_record():
    """Code outside trainer/families/ asks the record; adding a family is one module."""
    import pathlib

    import trainer

    root = pathlib.Path(trainer.__file__).parent
    names = set(families.NAMES)
    found = [
        f"{path.relative_to(root)}:{line}: {value!r}"
        for path in sorted(root.rglob("*.py"))
        if "families" not in path.relative_to(root).parts
        for line, value in _string_constants(path)
        if value in names or any(value.startswith(f"{n}.") for n in names)
    ]
    assert not found, "family named outside trainer/families/: " + "; ".join(found)


def test_messages_name_the_registered_families(tmp_path, capsys):
    """What the user reads names every family the registry holds, ModernBERT too."""
    from trainer.models import keras_hub_presets
    from trainer.pretraining import config

    assert families.said() == "roberta, bert or modernbert"
    assert families.said([families.get("bert")]) == "bert"
    with pytest.raises(keras_hub_presets.PresetError) as refused:
        keras_hub_presets.write(str(tmp_path), str(tmp_path / "tok"))
    with_tokenizers = [f.name for f in families.ALL if f.preset_tokenizer]
    assert all(name in str(refused.value) for name in with_tokenizers)
    with pytest.raises(SystemExit):
        config.parse_args(["--help"])
    description = " ".join(capsys.readouterr().out.split())
    assert f"Pretrain a {families.said()} masked language model" in description
