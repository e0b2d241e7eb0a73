"""Writes a corpus of real English prose that needs no download: the docstrings of the
Python standard library and the installed packages, one JSONL document per docstring.

    python -m beam_pipelines.demo_corpus --output corpus.jsonl --max_mb 20
"""

from __future__ import annotations

import ast
import json
import os
import sys
import sysconfig

from common import flags


def _docstrings(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc and len(doc) >= 200:  # short ones are mostly "Return x." boilerplate
                yield doc


def python_files(roots: list[str]):
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in ("test", "tests", "__pycache__"))
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(folder, name)


def write_corpus(output: str, max_bytes: int) -> tuple[int, int]:
    """Writes documents until `max_bytes`; returns (documents, bytes). Deterministic."""
    roots = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]]
    seen, documents, size = set(), 0, 0
    with open(output, "w", encoding="utf-8") as out:
        for path in python_files(roots):
            for doc in _docstrings(path):
                if doc in seen:
                    continue
                seen.add(doc)
                line = json.dumps({"text": doc, "source": os.path.relpath(path, roots[0])})
                out.write(line + "\n")
                documents, size = documents + 1, size + len(line) + 1
                if size >= max_bytes:
                    return documents, size
    return documents, size


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--max_mb", type=float, default=20)
    args = parser.parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    documents, size = write_corpus(args.output, int(args.max_mb * 1e6))
    print(f"wrote {documents:,} documents, {size / 1e6:.1f} MB to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
