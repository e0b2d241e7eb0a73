"""Model-card metadata the Hugging Face Hub accepts: `--language` and `--license`, checked
when a command starts, so that a run does not train for hours to have its card refused at
push time (the Hub checks a README.md's metadata before taking it: `/api/validate-yaml`).

- license: one of the Hub's identifiers (hub-docs `docs/hub/repositories-licenses.md` as of
  2026-08-22; the Hub's own refusal lists the same names, huggingface_hub issue #4218).
- language: what huggingface_hub 2.4's `ModelCardData` documents: an ISO 639-1, 639-2 or
  639-3 code (two or three letters) or a special value such as "code" or "multilingual".
  Two-letter codes are checked against ISO 639-1; three-letter ones only for their form
  (ISO 639-3 has ~7,900 codes; the Hub has the last word on those).

Example:
    >>> check("en", "apache-2.0")
    >>> check("english", None)  # raises CardMetadataError: ... (two or three letters ...)
"""

from __future__ import annotations

import difflib
import re

from common.errors import UserError

LICENSES = frozenset(
    """
    apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0
    bigcode-openrail-m afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause
    bsd-3-clause-clear c-uda cc cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0
    cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0
    cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 cdla-sharing-1.0
    cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1
    eupl-1.2 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc h-research
    intel-research lppl-1.3c ms-pl apple-ascl apple-amlr mpl-2.0 odc-by odbl openmdw-1.0
    openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl lgpl-lr deepfloyd-if-license
    fair-noncommercial-research-license llama2 llama3 llama3.1 llama3.2 llama3.3 llama4
    grok2-community gemma unknown other openmdw-1.1""".split()
)
ISO_639_1 = frozenset(
    """
    aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy
    da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu
    hy hz ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb
    lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om
    or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw
    ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu
""".split()
)
SPECIAL_LANGUAGES = ("code", "multilingual")
_THREE_LETTERS = re.compile(r"[a-z]{3}")


class CardMetadataError(UserError):
    """A --language or --license the Hub would refuse in a model card."""


def check(language: str | None, license: str | None) -> None:
    """Raises CardMetadataError (one line) for a value the Hub does not accept."""
    if language is not None and not _is_language(language):
        raise CardMetadataError(
            f"--language {language!r} is not a language code the Hub accepts: one ISO 639-1 "
            "code (two letters, e.g. en) or ISO 639-2/3 code (three letters), or "
            f"{' or '.join(SPECIAL_LANGUAGES)}."
        )
    if license is not None and license not in LICENSES:
        close = difflib.get_close_matches(license.lower(), LICENSES, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise CardMetadataError(
            f"--license {license!r} is not a license identifier the Hub accepts{hint}; see "
            "https://huggingface.co/docs/hub/repositories-licenses (or use other)."
        )


def _is_language(code: str) -> bool:
    return (
        code in ISO_639_1 or code in SPECIAL_LANGUAGES or _THREE_LETTERS.fullmatch(code) is not None
    )
