"""Real text in many languages that no one on this project wrote, from what a Linux machine
ships: the translated message catalogs of its programs (`/usr/share/locale/LANG/LC_MESSAGES/
*.mo`) and its translated manual pages (`/usr/share/man/LANG`). Benchmarks only: tests write
their own texts (tests/support/multilingual.py), since a test machine may lack these.

A document is a run of translated messages of one catalog (in a fixed scattered order) of at least
`min_chars` characters (a paragraph of help text), or one manual page as `man` renders it.
"""

from __future__ import annotations

import gettext
import glob
import hashlib
import os
import struct
import subprocess

LOCALES = {
    "zh": "zh_CN",
    "ja": "ja",
    "th": "th",
    "ko": "ko",
    "de": "de",
    "ru": "ru",
    "nb": "nb",
    "fr": "fr",
}


def _scattered(key) -> bytes:
    """A fixed pseudo-random order: catalogs sort messages by their English text, which
    puts twenty variants of one message side by side (a repetitive document no program's
    help text is)."""
    return hashlib.blake2b(str(key).encode("utf-8", "surrogatepass"), digest_size=8).digest()


def _catalogs(locale: str):
    """The msgid -> msgstr table of every readable catalog of `locale`."""
    for path in sorted(glob.glob(f"/usr/share/locale/{locale}/LC_MESSAGES/*.mo")):
        try:
            with open(path, "rb") as f:
                yield gettext.GNUTranslations(f)._catalog
        except (OSError, ValueError, struct.error):  # not a readable catalog: skipped
            continue


def _grouped(messages, min_chars: int) -> list[str]:
    """Consecutive messages joined into documents of at least `min_chars` characters."""
    docs, current = [], []
    for message in messages:
        current.append(message.strip())
        if sum(map(len, current)) >= min_chars:
            docs.append("\n".join(current))
            current = []
    return docs


def catalog_documents(lang: str, min_chars: int = 400) -> list[str]:
    """Documents made of the translated messages of every catalog of `lang`."""
    docs = []
    for catalog in _catalogs(LOCALES.get(lang, lang)):
        docs += _grouped(
            (
                catalog[key]
                for key in sorted(catalog, key=_scattered)
                if key != "" and isinstance(catalog[key], str) and catalog[key].strip()
            ),
            min_chars,
        )
    return docs


def english_documents(min_chars: int = 400) -> list[str]:
    """English: the source strings (msgids) of the German catalogs, in msgid order, as the
    benchmarks measured them."""
    docs = []
    for catalog in _catalogs("de"):
        docs += _grouped(sorted(k for k in catalog if isinstance(k, str) and k.strip()), min_chars)
    return docs


def man_documents(lang: str) -> list[str]:
    """Each translated manual page of `lang`, rendered as plain text (empty without `man`)."""
    docs = []
    env = dict(os.environ, MANWIDTH="100", LANG="C.UTF-8")
    for path in sorted(glob.glob(f"/usr/share/man/{lang}/man*/*")):
        try:
            out = subprocess.run(
                ["man", "-l", "-E", "UTF-8", path],
                capture_output=True,
                env=env,
                timeout=30,
                check=False,
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        text = out.decode("utf-8", "replace").replace("\b", "")
        if text.strip():
            docs.append(text)
    return docs


def documents(lang: str) -> list[str]:
    return catalog_documents(lang) + man_documents(lang)
