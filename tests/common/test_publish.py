"""--push_to targets: what parses, what each export format goes to, one-line refusals."""

import pytest

from common import publish
from common.publish import PushTargetError


def test_hf_and_kaggle_targets_parse():
    target = publish.parse("hf://my-org/roberta_tiny.v2")
    assert (target.hub, target.repo_id, target.uri) == ("hf", "my-org/roberta_tiny.v2",
                                                        "hf://my-org/roberta_tiny.v2")
    kaggle = publish.parse("kaggle://me/roberta/keras/tiny-v1")
    assert (kaggle.hub, kaggle.handle) == ("kaggle", "me/roberta/keras/tiny-v1")


@pytest.mark.parametrize("uri, message", [
    ("my-org/model", "names no hub"),
    ("s3://bucket/model", "names no hub"),
    ("hf://model", "hf://ORG/NAME"),
    ("hf://org/a/b", "hf://ORG/NAME"),
    ("hf://org/bad--name", "not a valid Hub name"),
    ("hf://org/-lead", "not a valid Hub name"),
    ("hf://org/trail.", "not a valid Hub name"),
    ("hf://org/" + "x" * 90, "leave room for the preset"),
    ("kaggle://me/model/keras", "four names"),
    ("kaggle://me/model/pytorch/v1", "'keras' framework"),
])
def test_bad_targets_are_one_line(uri, message):
    with pytest.raises(PushTargetError, match=message) as err:
        publish.parse(uri)
    assert "\n" not in str(err.value)


def test_each_format_goes_to_its_repository():
    hf = publish.parse("hf://org/m")
    assert publish.repos_for(hf, ("keras-hub", "hf")) == {
        "keras-hub": "hf://org/m-keras-hub", "hf": "hf://org/m"}
    assert publish.repos_for(hf, ("hf",)) == {"hf": "hf://org/m"}
    assert publish.repos_for(hf, ("keras-hub",)) == {"keras-hub": "hf://org/m"}
    kaggle = publish.parse("kaggle://me/m/keras/v1")
    assert publish.repos_for(kaggle, ("keras-hub", "hf")) == {
        "keras-hub": "kaggle://me/m/keras/v1"}
    with pytest.raises(PushTargetError, match="Kaggle takes the keras-hub preset"):
        publish.repos_for(kaggle, ("hf",))


def test_tokenizers_go_to_hugging_face_only():
    assert publish.tokenizer_target("hf://org/tok").repo_id == "org/tok"
    with pytest.raises(PushTargetError, match="Hugging Face repository"):
        publish.tokenizer_target("kaggle://me/tok/keras/v1")


def test_push_flags_check_the_target_when_built():
    assert publish.PushFlags(None).push_to is None
    with pytest.raises(PushTargetError):
        publish.PushFlags("hf://no-org")
