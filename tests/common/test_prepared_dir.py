"""A prepared folder's names: spelled once, in common/prepared_dir.py, and unchanged on disk
(earlier outputs must stay readable and sweepable, so every name here is a literal)."""

import ast
import pathlib
import re

import pytest

from common import prepared_dir

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN = "r20261122120000a1b2c3"


def test_the_layout_on_disk():
    assert prepared_dir.split_dir("out", "train") == "out/train"
    assert (
        prepared_dir.shard_path("gs://b/out", "train", "t.tfrecord")
        == "gs://b/out/train/t.tfrecord"
    )
    assert prepared_dir.manifest_path("out/train") == "out/train/manifest.json"
    assert prepared_dir.marker_path("out/train") == "out/train/_COMPLETE"
    assert prepared_dir.lock_path("gs://b/out") == "gs://b/out/_LOCK"
    assert prepared_dir.runs_dir("out") == "out/_runs"
    assert prepared_dir.run_record_path("out", RUN) == f"out/_runs/{RUN}.json"
    assert prepared_dir.dead_letter_dir("out") == "out/dead_letter"
    assert prepared_dir.dead_letter_prefix("out", RUN) == f"out/dead_letter/{RUN}-dead_letter"
    assert prepared_dir.sample_prefix("out", RUN) == f"out/dead_letter/{RUN}-removed_sample"
    assert (prepared_dir.TEMP_GLOB, prepared_dir.BEAM_TEMP_PREFIX, prepared_dir.JSONL_SUFFIX) == (
        ".tmp-*",
        "beam-temp-",
        ".jsonl",
    )


def test_the_docstring_draws_every_name():
    drawing = prepared_dir.__doc__
    for name in (
        prepared_dir.MANIFEST,
        prepared_dir.MARKER,
        prepared_dir.RUNS_DIR + "/",
        prepared_dir.DEAD_LETTER_DIR + "/",
        prepared_dir.LOCK,
        f"{{run_id}}-{prepared_dir.DEAD_LETTER_KIND}-",
        f"{{run_id}}-{prepared_dir.SAMPLE_KIND}-",
        prepared_dir.BEAM_TEMP_PREFIX,
        prepared_dir.TEMP_GLOB,
        prepared_dir.JSONL_SUFFIX,
    ):
        assert name in drawing, name


def test_sample_files_are_told_from_dead_letters():
    sample = prepared_dir.sample_prefix("gs://b/out", RUN) + "-00000-of-00001.jsonl"
    dead = prepared_dir.dead_letter_prefix("gs://b/out", RUN) + "-00003-of-00008.jsonl"
    assert prepared_dir.is_sample_file(sample) and not prepared_dir.is_sample_file(dead)


def test_committed_split_dirs_are_sorted_by_folder_name(tmp_path):
    for split in ("x-y", "x", "empty"):
        (tmp_path / split).mkdir()
        if split != "empty":
            (tmp_path / split / "manifest.json").write_text("{}")
    # "x-y/manifest.json" sorts before "x/manifest.json"; the folders themselves do not.
    assert prepared_dir.committed_split_dirs(str(tmp_path)) == [
        str(tmp_path / "x"),
        str(tmp_path / "x-y"),
    ]


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "a/b",
        "a\\b",
        "..",
        ".",
        "",
        " train",
        "_runs",
        "dead_letter",
        ".tmp-1",
        "_LOCK",
        "tab\there",
    ],
)
def test_split_names_are_single_folder_names(name):
    assert prepared_dir.split_name_problem(name)
    with pytest.raises(prepared_dir.SplitNameError):
        prepared_dir.split_dir("gs://b/out", name)


@pytest.mark.parametrize("name", ["train", "validation", "test", "train-2", "wiki.en", "x[1]"])
def test_ordinary_split_names_pass(name):
    assert prepared_dir.split_dir("out", name) == f"out/{name}"


# A prepared folder's names inside a string of code (docstrings are prose and may name them);
# `dead_letter_files` is a manifest field, `dead_letter.jsonl` the tokenizer folder's own file.
_NAMES = re.compile(
    r"_LOCK|manifest\.json|_COMPLETE|beam-temp|\.tmp-|(?<!\w)_runs(?!\w)"
    r"|(?<!\w)dead_letter(?!\w|\.jsonl)|removed_sample(?!_size)"
)
_SPELLERS = {"common/prepared_dir.py", "common/staging.py"}  # staging: atomic writes' prefix


def _code_strings(path: pathlib.Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            yield node.lineno, node.value


def test_no_other_module_spells_a_prepared_folder_name():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for package in ("common", "beam_pipelines", "trainer")
        for path in sorted((ROOT / package).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in _SPELLERS
        for line, text in _code_strings(path)
        if _NAMES.search(text)
    ]
    assert not found, "\n".join(found)
