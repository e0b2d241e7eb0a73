"""The Hugging Face folder push: a gs:// folder is staged locally whole; pushes and their
errors against the stand-in Hub (tests/support/hub.py)."""

import os

import pytest

from common import fs, hf_push, publish

FILES = {
    "config.json": b"{}",
    "tokenizer/tokenizer.json": b'{"model": {}}',
    "README.md": b"---\nlibrary_name: x\n---\n",
}


def _write(folder):
    for name, data in FILES.items():
        fs.write_bytes(fs.join(folder, *name.split("/")), data)


def _read_local(folder):
    found = {}
    for d, _, names in os.walk(folder):
        for name in names:
            with open(os.path.join(d, name), "rb") as f:
                found[os.path.relpath(os.path.join(d, name), folder)] = f.read()
    return found


def test_a_gcs_folder_is_staged_whole(gcs):
    gcs.apply_env()
    folder = gcs.url("exports/hf")
    _write(folder)
    with hf_push.local_folder(folder) as local:
        assert _read_local(local) == FILES
    assert not os.path.exists(local)  # the copy is gone afterwards


def test_push_folder_and_ignore(hub, tmp_path):
    _write(str(tmp_path))
    (tmp_path / "dead_letter.jsonl").write_bytes(b"{}\n")
    url = hf_push.push_folder(
        str(tmp_path), publish.parse("hf://org/tok"), "Upload", ignore=("dead_letter.jsonl",)
    )
    assert url == f"{hub.url}/org/tok"
    assert hub.files("org/tok") == FILES


def test_an_unreachable_hub_is_one_line(hub, tmp_path):
    _write(str(tmp_path))
    hub.close()  # nothing listens there any more
    with pytest.raises(hf_push.PushError, match=r"^push to hf://org/x failed: ") as err:
        hf_push.push_folder(str(tmp_path), publish.parse("hf://org/x"), "Upload")
    assert "\n" not in str(err.value)
