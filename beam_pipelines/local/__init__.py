"""The local runner's twins of prepare's keyed steps: exact dedup from keys sorted on disk
(exact_dedup.py), near dedup from band keys sorted on disk (near_dedup.py), the shuffle
through sorted runs of rows (shuffle.py), chosen together by execution.OnDiskExecution; and
the memory/disk preflight of a local run (memory_check.py)."""
