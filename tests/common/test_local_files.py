"""common/local_files.py (fs.py's backing where Apache Beam is not installed) answers as
Beam's own FileSystems does, on the same folder, for the patterns fs.py builds."""

import os

import pytest
from apache_beam.io.filesystems import FileSystems as Beam

from common import fs, local_files
from common.errors import UserError

FILES = (
    "a.txt",
    "b.txt",
    "ab.json",
    "sub/c.txt",
    "sub/deep/d.txt",
    "br[ck]et/e.txt",
    "q?x/f.txt",
    "star*/g.txt",
    ".hidden",
)


@pytest.fixture
def tree(tmp_path):
    for name in FILES:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * len(name))
    return str(tmp_path)


PATTERNS = [
    "*",
    "*.txt",
    "**",
    "**.txt",
    "?.txt",
    "[ab].txt",
    "[!a].txt",
    "[a-b]*",
    "sub/*",
    "sub/**",
    "sub/",
    "a.txt",
    "missing.txt",
    "missing/*",
    "sub",
    fs.escape_glob("br[ck]et") + "/*",
    fs.escape_glob("q?x") + "/*",
    fs.escape_glob("star*") + "/**",
    "*/e.txt",
    "**/d.txt",
]


@pytest.mark.filterwarnings("ignore:Possible nested set")  # `[[]`, exact for both
@pytest.mark.parametrize("pattern", PATTERNS)
def test_match_lists_what_beam_lists(tree, pattern):
    full = os.path.join(tree, pattern)
    want = {(m.path, m.size_in_bytes) for m in Beam.match([full])[0].metadata_list}
    got = {
        (m.path, m.size_in_bytes) for m in local_files.FileSystems.match([full])[0].metadata_list
    }
    assert got == want


def test_files_read_write_and_exist_as_with_beam(tree):
    path = os.path.join(tree, "new", "x.bin")
    with local_files.FileSystems.create(path) as f:
        f.write(b"abc")
    with local_files.FileSystems.open(path) as f:
        assert f.read() == b"abc"
    assert local_files.FileSystems.exists(path) and Beam.exists(path)


def test_a_remote_path_without_beam_is_one_line():
    with pytest.raises(UserError, match="need apache-beam"):
        local_files.FileSystems.exists("gs://bucket/x")
