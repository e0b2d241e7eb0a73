"""Exact accounting of a prepare run: every document and token is counted somewhere.

Documents read = tokenized + empty + rejected (dead-lettered); per split, tokens in =
tokens written + tokens dropped. The commit step checks both before anything is committed:
a mismatch is a bug (bad input is dead-lettered, never lost), so it stops the run.
"""

from __future__ import annotations

STATS = "stats"  # the tagged output of (counter name, count) pairs that the accounting sums

SPLIT_KEYS = ("documents_tokenized", "documents_empty", "tokens_in", "tokens_dropped",
              "tokens_padded")


def accounting_for(stats: dict, split: str, splits: list) -> dict:
    """The manifest's `accounting`: this split's counts and the run's input totals."""
    own = {key: int(stats.get(f"{split}/{key}", 0)) for key in SPLIT_KEYS}
    own["tokens_written"] = own["tokens_in"] - own["tokens_dropped"]
    own["dropped_fraction"] = own["tokens_dropped"] / own["tokens_in"] if own["tokens_in"] else 0
    run = {key: int(stats.get(key, 0)) for key in ("documents_read", "documents_rejected")}
    for key in ("documents_tokenized", "documents_empty"):
        run[key] = sum(int(stats.get(f"{s}/{key}", 0)) for s in splits)
    return {"split": own, "run": run}


class AccountingError(RuntimeError):
    """The counts do not add up: a bug, never bad input (bad input is dead-lettered)."""


def check_accounting(stats: dict, written: list, splits: list) -> None:
    run = accounting_for(stats, splits[0], splits)["run"] if splits else {}
    documents = run.get("documents_tokenized", 0) + run.get("documents_empty", 0)
    if documents + run.get("documents_rejected", 0) != run.get("documents_read", 0):
        raise AccountingError(f"documents do not add up: {run}")
    unknown = {k.split("/")[0] for k in stats if "/" in k} - set(splits)
    if unknown:
        raise AccountingError(f"documents were assigned to unexpected splits {sorted(unknown)}")
    for split in splits:
        own = accounting_for(stats, split, splits)["split"]
        on_disk = sum(w["num_tokens"] for w in written if w["split"] == split)
        if own["tokens_in"] - own["tokens_dropped"] != on_disk:
            raise AccountingError(f"{split}: {own['tokens_in']} tokens in, "
                                  f"{own['tokens_dropped']} dropped, but {on_disk} written")
