"""--push_to targets: what parses, what each export format goes to, one-line refusals."""

import pytest

from common import card_metadata, publish
from common.publish import PushTargetError


def test_hf_and_kaggle_targets_parse():
    target = publish.parse("hf://my-org/roberta_tiny.v2")
    assert (target.hub, target.repo_id, target.uri) == (
        "hf",
        "my-org/roberta_tiny.v2",
        "hf://my-org/roberta_tiny.v2",
    )
    kaggle = publish.parse("kaggle://me/roberta/keras/tiny-v1")
    assert (kaggle.hub, kaggle.handle) == ("kaggle", "me/roberta/keras/tiny-v1")


@pytest.mark.parametrize(
    "uri, message",
    [
        ("my-org/model", "names no hub"),
        ("s3://bucket/model", "names no hub"),
        ("hf://model", "hf://ORG/NAME"),
        ("hf://org/a/b", "hf://ORG/NAME"),
        ("hf://org/bad--name", "not a valid Hub repository: Cannot have -- or .."),
        ("hf://org/-lead", "not a valid Hub repository"),
        ("hf://org/trail.", "not a valid Hub repository"),
        ("hf://org/name.git", "'org/name.git' is not a valid Hub repository: .*'.git'"),
        ("hf://org/name\n", r"'org/name\\n' is not a valid Hub repository"),
        ("hf://org/caf\u00e9", "not a valid Hub repository"),
        ("hf://org/" + "x" * 90, "leave room for the preset"),
        ("kaggle://me/model/keras", "four names"),
        ("kaggle://me/model/keras/v1\n", "four names"),
        ("kaggle://me/model/pytorch/v1", "'keras' framework"),
    ],
)
def test_bad_targets_are_one_line(uri, message):
    with pytest.raises(PushTargetError, match=message) as err:
        publish.parse(uri)
    assert "\n" not in str(err.value)


def test_each_format_goes_to_its_repository():
    hf = publish.parse("hf://org/m")

    def uris(target, formats):
        return {f: t.uri for f, t in publish.repos_for(target, formats).items()}

    assert uris(hf, ("keras-hub", "hf")) == {
        "keras-hub": "hf://org/m-keras-hub",
        "hf": "hf://org/m",
    }
    assert uris(hf, ("hf",)) == {"hf": "hf://org/m"}
    assert uris(hf, ("keras-hub",)) == {"keras-hub": "hf://org/m"}
    kaggle = publish.parse("kaggle://me/m/keras/v1")
    assert uris(kaggle, ("keras-hub", "hf")) == {"keras-hub": "kaggle://me/m/keras/v1"}
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


@pytest.mark.parametrize(
    "language, license, message",
    [
        ("english", None, "--language 'english' is not a language code the Hub accepts"),
        ("jp", None, "--language 'jp' is not"),  # Japanese is ja
        ("EN", None, "--language 'EN' is not"),
        (
            None,
            "Apache-2.0",
            "--license 'Apache-2.0' is not a license identifier the Hub "
            "accepts (did you mean apache-2.0?)",
        ),
        (None, "gpl-3.0-or-later", "--license 'gpl-3.0-or-later' is not"),
    ],
)
def test_card_metadata_the_hub_would_refuse_is_refused_when_the_flags_are_built(
    language, license, message
):
    with pytest.raises(card_metadata.CardMetadataError) as err:
        publish.PushFlags("hf://org/m", language, license)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "language, license",
    [
        ("en", "apache-2.0"),
        ("ja", "cc-by-sa-4.0"),
        ("eng", "other"),
        ("code", "llama3.1"),
        ("multilingual", None),
        (None, "openrail++"),
    ],
)
def test_card_metadata_the_hub_accepts_passes(language, license):
    assert publish.PushFlags(None, language, license).language == language
