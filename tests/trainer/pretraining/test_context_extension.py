"""trainer/pretraining/context_extension.py without a training run: what an extension may change,
the family it needs, and where the data's stream starts."""

import pytest

from trainer.pretraining import context_extension
from trainer.pretraining.plan import PlanError
from trainer.run_folder.run_record import RunRecord

SAVED = {
    "family": "modernbert",
    "max_length": 32,
    "train_data_digest": "a",
    "seed": 1,
    "backbone_config": {"max_sequence_length": 32, "global_rope_theta": 1e4, "num_heads": 2},
}
LONGER = {
    **SAVED,
    "max_length": 64,
    "train_data_digest": "b",
    "backbone_config": {"max_sequence_length": 64, "global_rope_theta": 1.6e5, "num_heads": 2},
}


def _record(config, **changed):
    return RunRecord.from_dict({**config, **changed})


def test_the_data_its_length_and_the_familys_arguments_may_change_nothing_else():
    view = context_extension.allowed(_record(SAVED), _record(LONGER), "run")
    assert {k: view[k] for k in LONGER} == LONGER  # check_continuation then sees no change
    wider = _record(LONGER, backbone_config={**LONGER["backbone_config"], "num_heads": 4})
    view = context_extension.allowed(_record(SAVED), wider, "run")
    assert view["backbone_config"]["num_heads"] == 2  # still the saved one: refused later
    assert context_extension.changes(_record(SAVED), _record(LONGER)) == {
        "max_length": [32, 64],
        "train_data_digest": ["a", "b"],
        "backbone_config.global_rope_theta": [1e4, 1.6e5],
        "backbone_config.max_sequence_length": [32, 64],
    }


@pytest.mark.parametrize("family", ["roberta", "bert"])
def test_a_family_with_a_position_table_cannot_be_extended(family):
    with pytest.raises(PlanError, match="only a family with rotary positions"):
        context_extension.allowed(
            _record(SAVED, family=family), _record(LONGER, family=family), "run"
        )


def test_an_extension_goes_to_a_longer_length():
    shorter = _record(LONGER, max_length=16)
    with pytest.raises(PlanError, match="goes to a longer --max_length"):
        context_extension.allowed(_record(SAVED), shorter, "run")


def test_the_data_stream_starts_where_the_data_changed_and_stays_there():
    saved, longer = _record(SAVED), _record(LONGER)
    assert context_extension.data_start_step(None, longer, 0) == 0
    assert context_extension.data_start_step(saved, longer, 40) == 40  # the extension
    resumed = _record(LONGER, data_start_step=40)
    assert context_extension.data_start_step(resumed, longer, 60) == 40  # a resume inside it


def test_what_any_restart_may_change_an_extension_may_change_and_help_and_docs_say_so():
    """ModernBERT's extension trains at its own learning rate: a changed --learning_rate is
    accepted, as on any restart, and --help and docs/modernbert.md name it as allowed."""
    import pathlib
    import re

    from common import flags
    from trainer.pretraining import config, plan

    saved, now = _record(SAVED, learning_rate=8e-4), _record(LONGER, learning_rate=3e-4)
    view = context_extension.allowed(saved, now, "run")
    plan.check_continuation(view, now.raw, "run")  # nothing refused
    (field,) = [f for f in flags.flag_fields(config.TrainConfig) if f.name == "extend_context"]
    help_text = " ".join(field.metadata["help"].split())
    docs = pathlib.Path(__file__).parents[3] / "docs" / "modernbert.md"
    section = docs.read_text().split("## Context extension")[1].split("\n## ")[0]
    assert "--learning_rate" in help_text and "`--learning_rate`" in section
    named = re.findall(r"--(\w+)", context_extension.RESTART_MAY_CHANGE)
    assert "learning_rate" in named and not set(named) & set(plan.FIXED)
    assert context_extension.RESTART_MAY_CHANGE in help_text
    assert all(f"`--{name}`" in section for name in named), named
