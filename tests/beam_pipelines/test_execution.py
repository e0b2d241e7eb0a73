"""The prepare seam (beam_pipelines/execution.py, local/execution.py): the flags resolved once
into frozen `options.Settings` that each execution is built from, both dedups asked for in one
call (no order between calls to keep), and no argument that an implementation throws away."""

import ast
import dataclasses
import inspect
import textwrap

import apache_beam as beam
import pytest

from beam_pipelines import dedup, minhash, near_dedup, options, prepare
from beam_pipelines.execution import GroupingExecution
from beam_pipelines.local import exact_dedup as local_exact
from beam_pipelines.local import near_dedup as local_near
from beam_pipelines.local.execution import OnDiskExecution
from tests.beam_pipelines.test_prepare import run_prepare, write_jsonl

EXECUTIONS = (GroupingExecution, OnDiskExecution)


def test_a_run_resolves_its_flags_once_into_frozen_settings(
    tmp_path, corpus_texts, bpe_tokenizer_dir, monkeypatch
):
    """--splits is parsed once a run (each step that needed the split names parsed it
    again), and what the graph and its execution are built from cannot change under them."""
    a = write_jsonl(tmp_path / "a.jsonl", corpus_texts[:12])
    b = write_jsonl(tmp_path / "b.jsonl", corpus_texts[12:16] + corpus_texts[:2])
    parsed, built = [], []
    parse = options.parse_splits
    monkeypatch.setattr(options, "parse_splits", lambda spec: parsed.append(spec) or parse(spec))
    build = prepare.build
    monkeypatch.setattr(
        prepare,
        "build",
        lambda p, settings, *args, **kwargs: (
            built.append(settings),
            build(p, settings, *args, **kwargs),
        )[1],
    )
    run_prepare(
        "--splits",
        f"train={a};validation={b}",
        "--tokenizer",
        bpe_tokenizer_dir,
        "--output_dir",
        tmp_path / "out",
        "--max_length",
        32,
        "--dedup",
        "near",
    )
    assert len(parsed) == 1
    (settings,) = built
    assert settings.splits == ("train", "validation")
    assert settings.inputs == (("train", str(a)), ("validation", str(b)))
    assert settings.near == minhash.MinHashConfig() and settings.exact
    for record, name in ((settings, "splits"), (settings.flags, "max_length")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, name, None)


def _settings(tmp_path, mode):
    argv = [
        "--input",
        "x.jsonl",
        "--tokenizer",
        "tok",
        "--output_dir",
        str(tmp_path),
        "--dedup",
        mode,
    ]
    return options.resolve(prepare.pipeline_options(argv).view_as(options.PrepareOptions))


@pytest.mark.parametrize(
    "mode, grouping, on_disk",
    [
        ("none", (None, None), (None, None)),
        ("exact", (dedup.ExactDedup, None), (local_exact.ExactDedupByRereading, None)),
        (
            "near",
            (dedup.ExactDedup, near_dedup.NearDedup),
            (local_exact.ExactDedupByRereading, local_near.NearDedupByRereading),
        ),
    ],
)
def test_each_execution_gives_both_dedups_in_one_call(tmp_path, mode, grouping, on_disk):
    """Near dedup on disk reads the exact dedup's survivors: it used to need `exact_dedup`
    called first, an order only a comment kept."""
    settings = _settings(tmp_path, mode)
    reader = prepare.Reader(beam.Pipeline(runner="FnApiRunner"), [], settings.flags.source)
    found = {
        "grouping": GroupingExecution(settings, "r1").dedups(),
        "on_disk": OnDiskExecution(settings, "r1", reader, str(tmp_path)).dedups(),
    }
    for name, expected in (("grouping", grouping), ("on_disk", on_disk)):
        assert [type(step) if step else None for step in found[name]] == list(expected), name


def _unused_arguments(cls) -> list[str]:
    """Each method's parameters that its body never reads, and any `del` in it."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    unused = []
    for method in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        read = {
            n.id
            for n in ast.walk(method)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        unused += [
            f"{method.name}({arg.arg})" for arg in method.args.args[1:] if arg.arg not in read
        ]
        unused += [f"{method.name}: del" for n in ast.walk(method) if isinstance(n, ast.Delete)]
    return unused


def test_both_executions_have_one_seam_and_use_every_argument():
    for method in ("dedups", "shuffle"):
        assert inspect.signature(getattr(GroupingExecution, method)) == inspect.signature(
            getattr(OnDiskExecution, method)
        )
    for cls in EXECUTIONS:
        assert _unused_arguments(cls) == [], cls.__name__
