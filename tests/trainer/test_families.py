"""The family registry: one record per family, found by name, preset name or built model."""

import pytest

from trainer import families
from trainer.model import backbone_config, build_masked_lm


def test_flag_choices_are_the_registered_families():
    assert set(families.NAMES) == set(families._registry())


@pytest.mark.parametrize("name", families.NAMES)
def test_a_built_model_and_its_preset_name_lead_back_to_the_record(name):
    record = families.get(name)
    config = backbone_config(
        name, "tiny", 100, 16, dict(num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32)
    )
    masked_lm = build_masked_lm(name, config)
    assert families.of_model(masked_lm) is record
    assert families.of_registered_name(record.registered_name) is record
    assert ("segment_ids" in masked_lm.input) is record.takes_segment_ids


def test_unknown_family_is_one_line():
    with pytest.raises(ValueError, match="'gpt' is not one of"):
        families.get("gpt")
    assert families.of_registered_name("keras_hub>GPT2Backbone") is None
