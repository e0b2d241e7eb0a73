"""run_cli: one line and exit 2 for user mistakes only; UserError is not a ValueError."""

import pytest

from common.errors import UserError, named_by_user, run_cli


def _raise(err):
    def body():
        raise err
    return body


def test_a_user_error_is_one_line_and_exit_2(capsys):
    assert run_cli(_raise(UserError("bad flag; pass --x.")), []) == 2
    assert capsys.readouterr().err == "error: bad flag; pass --x.\n"


def test_a_missing_file_the_user_named_is_exit_2(capsys, tmp_path):
    missing = str(tmp_path / "nope" / "tokenizer.json")
    err = FileNotFoundError(2, "No such file", missing)
    assert run_cli(_raise(err), ["--tokenizer", str(tmp_path / "nope") + "/"]) == 2
    assert run_cli(_raise(err), [f"--input={missing}"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {missing} does not exist."] * 2


def test_a_missing_file_the_program_chose_keeps_its_traceback(tmp_path):
    err = FileNotFoundError(2, "No such file", "/usr/lib/some/internal.so")
    with pytest.raises(FileNotFoundError):
        run_cli(_raise(err), ["--input", str(tmp_path)])
    with pytest.raises(FileNotFoundError):  # no filename at all
        run_cli(_raise(FileNotFoundError("gone")), ["--input", str(tmp_path)])


def test_user_error_is_not_a_value_error():
    """Readers that dead-letter ValueError (bad bytes) must not swallow a usage mistake."""
    assert not issubclass(UserError, ValueError)
    from beam_pipelines import sources

    assert not sources.is_format_error(UserError("x"))
    assert sources.is_format_error(ValueError("not a parquet file"))


def test_named_by_user_matches_paths_not_prefixes_of_names():
    assert named_by_user("/a/b/c", ["/a/b"])
    assert not named_by_user("/a/bc", ["/a/b"])
    assert not named_by_user(None, ["/a"])
