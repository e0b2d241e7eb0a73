"""benchmarks/code_entities.py on modules it writes itself (no installed package read): the
markup becomes IOB2 tags on the displayed words, what is not prose or not read is left out,
the files parse as CoNLL columns, a rerun writes the same bytes, a sentence is kept once and
a module's sentences all go to one split."""

import collections
import json

import pytest

from benchmarks import code_entities
from trainer.tasks import tagging

MODULE = '''"""Module {i} of the widget package.

The :class:`~widgets.core.Widget{i}` holds parts made by :func:`make_part{i}`.
Call :meth:`Widget{i}.spin` to turn it; it raises :exc:`SpinError` when stuck.
Every widget{i} has a colour and a size, kept in one record.
See :ref:`the guide <guide>` and the :mod:`widgets.io` module for ``save({i})`` calls.
Pass ``flag{i}`` to enable the widget.
This :obj:`thing{i}` is left out, and so is an unclosed :class:`Broken{i} here.
Shared sentences like this one appear in every module.

>>> Widget{i}().spin()
Turned widget {i} once.

Example::

    Code block {i} with :class:`Hidden` markup.
"""


def f{i}():
    """Return the :attr:`Widget{i}.size` of a widget.

    :param x: The :class:`Widget{i}` to measure.
        It may be empty.
    """
'''


def write_modules(root, count=40):
    package = root / "widgets"
    package.mkdir(parents=True)
    for i in range(count):
        (package / f"m{i}.py").write_text(MODULE.format(i=i), encoding="utf-8")
    (package / "tests").mkdir()
    (package / "tests" / "test_x.py").write_text('"""Uses :class:`Skipped` always."""\n')
    (package / "broken.py").write_text("def (:\n")  # not Python: skipped
    return root


def build(tmp_path, root, name="task", *extra) -> dict:
    out = tmp_path / name
    argv = ["--roots", str(root), "--output_dir", str(out), "--dev_share", "0.2"]
    argv += ["--test_share", "0.2", *extra]
    assert code_entities.main(argv) == 0
    return {
        split: tagging.read_tagged(str(out / f"{split}.conll"))
        for split in ("train", "dev", "test")
    }


def tagged(split) -> list[list[tuple[str, str]]]:
    return [list(zip(words, tags)) for words, tags in zip(split.words, split.tags)]


def test_markup_becomes_tags_on_the_displayed_words():
    config = code_entities.Flags(output_dir="x")
    doc = (
        "Make a :class:`~a.b.Thing` from :py:func:`!load` or :meth:`the loader <Loader.run>`.\n"
        "Uses ``x[0] == 1`` and :data:`MAX`, per :pep:`8`."
    )
    found = list(code_entities.sentences(doc, config))
    assert found == [
        (
            ["Make", "a", "Thing", "from", "load", "or", "the", "loader", "."],
            ["O", "O", "B-CLASS", "O", "B-FUNC", "O", "B-METH", "I-METH", "O"],
        ),
        (
            ["Uses", "x", "[", "0", "]", "=", "=", "1", "and", "MAX", ",", "per", "PEP", "8", "."],
            ["O", "B-CODE", "I-CODE", "I-CODE", "I-CODE", "I-CODE", "I-CODE", "I-CODE"]
            + ["O", "B-ATTR", "O", "O", "O", "O", "O"],
        ),
    ]


def test_what_is_not_prose_or_not_read_is_left_out(tmp_path):
    config = code_entities.Flags(output_dir="x")
    path = tmp_path / "m.py"
    path.write_text(MODULE.format(i=7), encoding="utf-8")
    found = [
        " ".join(words)
        for doc in code_entities.docstrings(str(path))
        for words, _ in code_entities.sentences(doc, config)
    ]
    assert "Every widget7 has a colour and a size , kept in one record ." in found
    assert "It may be empty ." in found  # a field's continuation line
    assert len(found) == 10 and "Pass flag7 to enable the widget ." in found
    assert not [s for s in found if "thing7" in s or "Broken7" in s or "Turned" in s]
    assert not [s for s in found if "Code block" in s or "Hidden" in s]
    assert code_entities.split_sentences("Use it, e.g. Foo now. Then go.") == [
        "Use it, e.g. Foo now.",
        "Then go.",
    ]


def test_the_files_parse_a_rerun_is_identical_and_a_module_stays_in_one_split(tmp_path):
    root = write_modules(tmp_path / "src")
    splits = build(tmp_path, root, "a", "--plain_share", "0.5")  # every plain sentence kept
    build(tmp_path, root, "b", "--plain_share", "0.5")
    for name in ("train.conll", "dev.conll", "test.conll", "task.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    tagset = tagging.label_set(splits["train"])
    assert tagset.scheme == "IOB2" and "B-EXC" in tagset.labels and "B-CODE" in tagset.labels
    config = code_entities.Flags(output_dir="x", dev_share=0.2, test_share=0.2)
    seen_in = collections.defaultdict(set)
    for name, split in splits.items():
        for words in split.words:
            for word in words:
                if word.startswith("Widget") and word[6:].isdigit():
                    seen_in[word[6:]].add(name)
    assert len(seen_in) == 40
    for number, names in seen_in.items():
        assert names == {code_entities.split_of(f"widgets/m{number}.py", config)}
    assert {n for names in seen_in.values() for n in names} == {"train", "dev", "test"}
    text = [" ".join(w) for split in splits.values() for w in split.words]
    assert sum("Shared sentences like this one" in t for t in text) == 1
    assert sum(t == "It may be empty ." for t in text) == 1
    assert not any("Skipped" in t for t in text)
    assert not any(t.startswith("Pass flag") for t in text)  # CODE alone: left out
    task = json.loads((tmp_path / "a" / "task.json").read_text())
    assert task["repeated sentences"] == 2 * 39 and "output_dir" not in task["flags"]
    assert task["train"]["sentences"] == len(splits["train"])


def test_a_share_of_sentences_without_entities_and_the_caps(tmp_path):
    root = write_modules(tmp_path / "src")
    splits = build(tmp_path, root, "a", "--plain_share", "0.25", "--max_eval", "8")
    for name, split in splits.items():
        plain = sum(all(t == "O" for t in tags) for tags in split.tags)
        marked = len(split) - plain
        assert plain == round(marked / 3) and (name == "train" or len(split) <= 8)
    none = build(tmp_path, root, "b", "--plain_share", "0")
    assert all(any(t != "O" for t in tags) for s in none.values() for tags in s.tags)


def test_bad_roots_are_one_line(tmp_path, capsys):
    assert code_entities.main(["--roots", str(tmp_path / "no"), "--output_dir", "o"]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert code_entities.main(["--roots", str(empty), "--output_dir", str(tmp_path / "o")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "not a folder" in lines[0] and "no train" in lines[1]


@pytest.mark.parametrize("value", [("--plain_share", "1"), ("--dev_share", "0.7")])
def test_out_of_bounds_flags_are_refused(value):
    with pytest.raises(SystemExit) as exit_:
        code_entities.main(["--output_dir", "o", *value])
    assert exit_.value.code == 2
