"""Every path a user gives is a name, never a pattern: `[`, `*`, `?`."""

import pytest

from common import fs, verify


@pytest.fixture(params=["local", "gcs"])
def base(request, tmp_path):
    if request.param == "local":
        return str(tmp_path)
    gcs = request.getfixturevalue("gcs")
    gcs.apply_env()
    return gcs.url("base")


def test_names_with_glob_characters_are_literal(base):
    odd, twin = fs.join(base, "prep[ab]"), fs.join(base, "prepa")
    for folder in (odd, twin):
        for name in ("x.txt", "y.txt", fs.join(".tmp-1", "z")):
            fs.write_bytes(fs.join(folder, name), b"1")
    assert [fs.basename(p) for p in fs.glob_in(odd, "*.txt")] == ["x.txt", "y.txt"]
    assert all(p.startswith(odd) for p in fs.glob_in(odd, "*.txt"))
    assert fs.glob_sizes_in(odd, "x.*") == {fs.join(odd, "x.txt"): 1}
    assert fs.size(fs.join(odd, "x.txt")) == 1
    fs.delete([fs.join(odd, "x.txt")])
    fs.delete_trees_in(odd, ".tmp-*")
    assert fs.exists(fs.join(twin, "x.txt")) and fs.exists(fs.join(twin, ".tmp-1", "z"))
    assert not fs.exists(fs.join(odd, "x.txt")) and not fs.exists(fs.join(odd, ".tmp-1", "z"))
    fs.write_bytes(fs.join(base, "star*"), b"1")
    fs.write_bytes(fs.join(base, "starling"), b"1")
    fs.delete([fs.join(base, "star*")])
    assert fs.exists(fs.join(base, "starling"))
    fs.delete_tree(odd)
    assert fs.exists(fs.join(twin, "y.txt")) and not fs.exists(fs.join(odd, "y.txt"))


def test_verify_takes_its_folder_literally(tmp_path, capsys):
    (tmp_path / "prepa" / "train").mkdir(parents=True)
    (tmp_path / "prepa" / "train" / "manifest.json").write_text("{}")
    assert verify.split_dirs(str(tmp_path / "prep[ab]")) == []
    assert verify.main([str(tmp_path / "prep[ab]")]) == 2
    assert "holds no committed split" in capsys.readouterr().err
