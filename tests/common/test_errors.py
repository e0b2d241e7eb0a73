"""run_cli: one line and exit 2 for user mistakes only; UserError is not a ValueError."""

import errno

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


def test_a_full_disk_inside_a_wrapped_error_is_one_line_naming_the_target(capsys, tmp_path):
    """Beam wraps a worker's OSError in a RuntimeError; a staged write's temporary name
    (`.tmp-{uuid}-NAME`) is reported as the file it stands for."""
    staged = str(tmp_path / "out" / ".tmp-0123456789abcdef0123456789abcdef-manifest.json")
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", staged)
        except OSError as inner:
            raise RuntimeError(f"OSError: {inner} [while running 'Commit']") from inner
    except RuntimeError as err:
        wrapped = err
    assert run_cli(_raise(wrapped), ["--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"error: cannot write {tmp_path / 'out' / 'manifest.json'}: no space left "
        "on device; the previous output (if any) is kept, nothing half-written is "
        "left"
    ]


def test_a_read_only_output_without_a_file_name_names_the_output_dir(capsys, tmp_path):
    err = OSError(errno.EROFS, "Read-only file system\n(h5py says more)")
    assert run_cli(_raise(err), [f"--output_dir={tmp_path}"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: cannot write {tmp_path}: read-only file system;")


def test_a_refused_permission_outside_the_named_paths_keeps_its_traceback(tmp_path):
    err = PermissionError(errno.EACCES, "Permission denied", "/usr/lib/some/cache")
    with pytest.raises(PermissionError):
        run_cli(_raise(err), ["--output_dir", str(tmp_path)])
    named = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "x"))
    assert run_cli(_raise(named), ["--output_dir", str(tmp_path)]) == 2
