"""The README and docs/ say what runs: every command in a ```bash block parses its flags, and
every relative link resolves.

A `python -m MODULE ...` line of this project runs the module as `__main__` with its flags; the
run stops as soon as the flags are parsed (and, for dataclass flags, validated), so nothing is
read or written. A `make TARGET VAR=...` line runs `make -n` (prints, runs nothing): the target
and variables must exist, and each project command make would run is parsed the same way.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from common import flags

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGES = ("common.", "beam_pipelines.", "trainer.", "benchmarks.")
# The programs a documented command may start with that this test does not parse: the cloud
# and system tools of the TPU VM recipe, and pytest (its own flags).
NOT_OURS = {"gcloud", "sudo", "git", "cd", "apt-get"}


class Parsed(BaseException):
    """Raised once a command's flags are parsed: a BaseException, so that `run_cli`, which
    turns exceptions into exit codes, lets it through."""


def code_lines(path: pathlib.Path):
    """(line number, command) for every command in the file's ```bash blocks; backslash
    continuations joined, comments dropped."""
    in_block, pending, start = False, "", 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            in_block = stripped == "```bash" and not in_block
            continue
        if not in_block:
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        command, pending = pending + stripped, ""
        if command and not command.startswith("#"):
            yield start, command


def commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line (split at `&&`, `||`, `;`), as word lists."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    result, current = [], []
    for word in lexer:
        if word in {"&&", "||", ";", "|"}:
            result.append(current)
            current = []
        else:
            current.append(word)
    return [c for c in result + [current] if c]


def documented_commands():
    for path in DOCS:
        for number, line in code_lines(path):
            for words in commands(line):
                yield pytest.param(
                    words,
                    id=f"{path.relative_to(ROOT)}:{number}:{words[0]}"
                    f"{' ' + words[2] if words[1:2] == ['-m'] else ''}",
                )


def stop(*args, **kwargs):
    raise Parsed


def entry_point(module):
    """The function `python -m module` calls (its `if __name__ == "__main__":` block)."""
    launched = getattr(getattr(module, "main", None), "module", None)  # trainer's launchers
    if launched:
        return importlib.import_module(launched).main
    source = pathlib.Path(module.__file__).read_text(encoding="utf-8")
    found = re.search(r'__name__ == "__main__":\s*(?:sys\.exit\()?(\w+)\(', source)
    assert found, f"{module.__name__} has no __main__ block"
    return getattr(module, found.group(1))


def parse_only(module: str, args: list[str], monkeypatch, capsys) -> None:
    """Runs `python -m module args` until its flags are parsed; fails on a usage error."""
    original_parse, original_parse_args = flags.parse, argparse.ArgumentParser.parse_args
    inside = []

    def parse(parser, cls, argv=None):
        inside.append(True)
        try:
            original_parse(parser, cls, argv)
        finally:
            inside.pop()
        stop()

    def parse_args(self, args=None, namespace=None):
        result = original_parse_args(self, args, namespace)
        if not inside:
            stop()
        return result

    monkeypatch.setattr(flags, "parse", parse)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
    cli = importlib.import_module(module)
    if module == "beam_pipelines.prepare":  # Beam's options parse without parse_args
        monkeypatch.setattr(cli, "_prepare", stop)
    monkeypatch.setattr(sys, "argv", [module, *args])
    try:
        entry_point(cli)()
    except Parsed:
        return
    except SystemExit as exit_:
        pytest.fail(
            f"python -m {module} {shlex.join(args)}: exit {exit_.code}: "
            f"{capsys.readouterr().err.strip()[-500:]}"
        )
    pytest.fail(f"python -m {module}: ran to the end without parsing flags")


def check_python(words, monkeypatch, capsys) -> None:
    module, args = words[2], words[3:]
    if module == "pytest":
        assert all((ROOT / a.split("::")[0]).exists() for a in args if a.startswith("tests/")), (
            words
        )
        return
    assert module.startswith(PACKAGES), f"not a module of this project: {module}"
    parse_only(module, args, monkeypatch, capsys)


def without_env(words: list[str]) -> list[str]:
    """The command after its leading VAR=value assignments."""
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]
    return words


def is_python_module(words: list[str]) -> bool:
    return (
        len(words) > 2
        and re.fullmatch(r"(\S*/)?python3?(\.\d+)?", words[0]) is not None
        and words[1] == "-m"
    )


def check_make(words, monkeypatch, capsys) -> None:
    # A dry run prints the target's recipe (and any venv it would build) and runs nothing.
    dry = subprocess.run(
        ["make", "-n", *words[1:]], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert dry.returncode == 0, f"{shlex.join(words)}: {dry.stderr.strip()}"
    for line in dry.stdout.replace("\\\n", " ").splitlines():  # recipes continue lines
        for inner in map(without_env, commands(line)):
            if is_python_module(inner) and inner[2].startswith(PACKAGES):
                parse_only(inner[2], inner[3:], monkeypatch, capsys)


@pytest.mark.parametrize("words", list(documented_commands()))
def test_documented_command_parses(words, monkeypatch, capsys):
    words = without_env(words)
    program = words[0]
    if program in NOT_OURS:
        return
    if program == "make":
        check_make(words, monkeypatch, capsys)
    elif is_python_module(words):
        check_python(words, monkeypatch, capsys)
    else:
        pytest.fail(f"a documented command this test does not know: {shlex.join(words)}")


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    text = path.read_text(encoding="utf-8")
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        assert resolved.exists(), f"{path.name}: link to {target} names nothing"
        if anchor and resolved.suffix == ".md":
            headings = {
                re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.*)$", resolved.read_text(encoding="utf-8"), re.M)
            }
            assert anchor in headings, f"{path.name}: link to {target}: no such heading"


def test_readme_test_command_is_the_one_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    readme_commands = [c for _, line in code_lines(ROOT / "README.md") for c in commands(line)]
    assert ["make", "test"] in readme_commands and "\nmake test\n" in ci


def test_commands_are_found():
    """The extraction itself: a test that finds no commands could never fail."""
    found = list(documented_commands())
    assert len(found) >= 10
    assert commands("a --x 1 && b 'c;d' # e") == [["a", "--x", "1"], ["b", "c;d"]]


POINTER = re.compile(r'(README|docs/[\w-]+\.md),? "([^"]+)"')


def test_pointers_from_the_code_name_a_place_in_the_docs():
    """A comment's `docs/training.md "Learning rate"` leads to a heading, a bullet or a bold
    lead of that name (three such pointers named README sections that had moved away)."""
    dead = []
    for package in (*PACKAGES, "tests."):
        for path in sorted((ROOT / package.rstrip(".")).rglob("*.py")):
            for doc, place in POINTER.findall(path.read_text(encoding="utf-8")):
                place = " ".join(w for w in place.split() if w != "#")  # across lines
                text = (ROOT / (doc + ".md" if doc == "README" else doc)).read_text(
                    encoding="utf-8"
                )
                lead = rf"^\s*(#+ |- |\d+\. |\*\*){re.escape(place)}"
                if not re.search(lead, text, re.M) and not re.search(
                    rf"\*\*{re.escape(place)}\*\*", text
                ):
                    dead.append(f"{path.relative_to(ROOT)}: {doc} {place!r}")
    assert dead == []
