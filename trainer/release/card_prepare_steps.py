"""The model card's rows for prepare's optional steps: which evaluation sets the training data
was checked against (`--decontaminate`) and which classifier kept it (`--quality_model`), read
from the training split's manifest (trainer/release/card_facts.py)."""

from __future__ import annotations


def decontamination(record: dict | None) -> str:
    """What prepare's --decontaminate checked (its manifest's `decontamination`)."""
    if not record:
        return "not checked"
    sets = ", ".join(
        f"{name} ({n['texts']:,} texts, {n['documents_matched']:,} documents matched)"
        for name, n in record["sets"].items()
    )
    outcome = "removed" if record["action"] == "remove" else "kept, reported"
    return (
        f"{record['ngram']}-grams of {sets}; {record['documents_matched']:,} matching "
        f"documents {outcome}"
    )


def quality_model(record: dict | None) -> str:
    """What prepare's --quality_model kept (its manifest's `quality_model`)."""
    if not record:
        return "none"
    kept = (
        f"score >= {record['threshold_used']:.4g}" if record["threshold_used"] is not None else ""
    )
    if record.get("keep_fraction") is not None:
        kept += f" (the top {record['keep_fraction']:g})"
    outcome = "removed" if record["action"] == "remove" else "kept, reported"
    return (
        f"{record['kind']} classifier (sha256 {record['sha256'][:12]}), {record['score']}: "
        f"{record['documents_kept']:,} of {record['documents_scored']:,} documents kept at "
        f"{kept}; {record['documents_below']:,} below it {outcome}"
    )
