"""A folder written whole or not at all: the previous one stays until the swap, a folder
that holds anything else is refused, and names are taken literally."""

import pytest

from common import folder_swap, fs


@pytest.fixture(params=["local", "gcs"])
def base(request, tmp_path):
    if request.param == "local":
        return str(tmp_path)
    gcs = request.getfixturevalue("gcs")
    gcs.apply_env()
    return gcs.url("base")


def _contents(folder):
    return {p[len(folder) + 1 :]: fs.read_bytes(p) for p in fs.files_under(folder)}


def _staged_leftovers(base):
    return [p for p in fs.files_under(base) if fs.TEMP_PREFIX in p]


def _previous(base):
    dest = fs.join(base, "exp[6]")  # a name with a glob character, taken literally
    for name, data in (("config.json", b"old"), ("a.txt", b"a"), ("sub/b.txt", b"b")):
        fs.write_bytes(fs.join(dest, *name.split("/")), data)
    fs.write_bytes(fs.join(base, "exp6", "config.json"), b"twin")  # what `[6]` would match
    return dest


def test_whole_folder_replaces_the_previous_folder_whole(base):
    dest = _previous(base)
    fs.write_bytes(fs.join(base, fs.temp_name("exp[6]"), "x"), b"a killed write's stage")
    with folder_swap.whole_folder(dest, markers=("config.json",)) as stage:
        fs.write_bytes(fs.join(stage, "config.json"), b"new")
        fs.write_bytes(fs.join(stage, "sub", "c.txt"), b"c")
    assert _contents(dest) == {"config.json": b"new", "sub/c.txt": b"c"}
    assert _contents(fs.join(base, "exp6")) == {"config.json": b"twin"}
    assert _staged_leftovers(base) == []


def test_whole_folder_keeps_the_previous_folder_when_the_block_fails(base):
    dest = _previous(base)
    before = _contents(dest)
    with pytest.raises(OSError):
        with folder_swap.whole_folder(dest, markers=("config.json",)) as stage:
            fs.write_bytes(fs.join(stage, "config.json"), b"new")
            raise OSError(28, "No space left on device")
    assert _contents(dest) == before and _staged_leftovers(base) == []
    with pytest.raises(OSError):
        with folder_swap.whole_folder(fs.join(base, "fresh"), markers=("config.json",)) as stage:
            fs.write_bytes(fs.join(stage, "config.json"), b"new")
            raise OSError(28, "No space left on device")
    assert not fs.files_under(fs.join(base, "fresh")) and _staged_leftovers(base) == []


def test_whole_folder_refuses_a_folder_that_holds_something_else(base):
    dest = fs.join(base, "mine")
    fs.write_bytes(fs.join(dest, "notes.txt"), b"keep me")
    with pytest.raises(folder_swap.NotReplaceableError, match="not an earlier output"):
        with folder_swap.whole_folder(dest, markers=("config.json",)):
            pytest.fail("the block must not run")
    assert _contents(dest) == {"notes.txt": b"keep me"} and _staged_leftovers(base) == []


def test_whole_folder_on_gcs_never_shows_markers_beside_other_files(gcs, monkeypatch):
    """Object stores have no rename: the old markers go first, the new ones come last, so a
    swap cut short leaves a folder no reader loads, never a mix that loads."""
    gcs.apply_env()
    dest = _previous(gcs.url("base"))
    copy, calls = fs.FileSystems.copy, []

    def copy_then_fail_at_the_markers(sources, destinations):
        calls.append([fs.basename(d) for d in destinations])
        if "config.json" in calls[-1]:
            raise OSError("connection reset")
        return copy(sources, destinations)

    monkeypatch.setattr(fs.FileSystems, "copy", copy_then_fail_at_the_markers)
    with pytest.raises(OSError):
        with folder_swap.whole_folder(dest, markers=("config.json",)) as stage:
            fs.write_bytes(fs.join(stage, "config.json"), b"new")
            fs.write_bytes(fs.join(stage, "a.txt"), b"new a")
    assert calls == [["a.txt"], ["config.json"]]
    assert "config.json" not in _contents(dest)


def test_whole_folder_refuses_the_current_folder(tmp_path, monkeypatch):
    dest = tmp_path / "exp"
    (dest / "inner").mkdir(parents=True)
    (dest / "config.json").write_text("an earlier output")
    monkeypatch.chdir(dest / "inner")
    with pytest.raises(folder_swap.NotReplaceableError, match="current folder"):
        with folder_swap.whole_folder(str(dest), markers=("config.json",)):
            pytest.fail("the block must not run")
    assert (dest / "config.json").read_text() == "an earlier output"
