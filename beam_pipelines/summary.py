"""What prepare prints once a run has committed: read back from the manifests it wrote, so the
summary shows what a reader of the output will find."""

from __future__ import annotations

from beam_pipelines import mixture, model_filter
from common import manifest, prepared_dir


def _split_line(split: str, m: manifest.Manifest) -> str:
    acc = m.accounting["split"]
    return (
        f"{split:>10}: {m.num_examples:,} sequences of {m.max_length} in {len(m.shards)} "
        f"shard(s); {acc['documents_tokenized']:,} documents, {acc['documents_empty']:,} "
        f"empty; tokens in {acc['tokens_in']:,}, written {acc['tokens_written']:,}, "
        f"dropped {acc['tokens_dropped']:,} ({100 * acc['dropped_fraction']:.4f} %), "
        f"padding {acc['tokens_padded']:,}"
    )


def _documents_line(output_dir: str, m: manifest.Manifest) -> str:
    """The run's document sum, with the terms of the steps it ran."""
    run = m.accounting["run"]
    repeated = f" + repeated {run['documents_repeated']:,}" if m.mixture else ""
    cut = f" + cut {run['documents_cut']:,}" if m.mixture else ""
    contaminated = run.get("documents_contaminated", 0)
    if m.decontamination:
        cut = f" + contaminated {contaminated:,}" + cut
    if m.quality_model:
        cut = f" + low quality {run.get('documents_low_quality', 0):,}" + cut
    return (
        f"documents read {run['documents_read']:,}{repeated} = tokenized "
        f"{run['documents_tokenized']:,} + empty {run['documents_empty']:,} + "
        f"rejected {run['documents_rejected']:,} + duplicate "
        f"{run['documents_duplicate']:,} + filtered {run['documents_filtered']:,}{cut} "
        f"(see {output_dir}/{prepared_dir.DEAD_LETTER_DIR}/)"
    )


def decontamination_lines(record: dict) -> list[str]:
    """What `--decontaminate` found (the manifest's `decontamination`): the run, each set."""
    if not record:
        return []
    lines = [
        f"decontamination ({record['ngram']}-grams, {record['action']}): "
        f"{record['documents_matched']:,} documents matched, "
        f"{record['documents_removed']:,} removed"
    ]
    lines += [
        f"  {name}: {n['documents_matched']:,} documents share {n['ngrams_matched']:,} n-grams "
        f"with its {n['texts']:,} texts ({n['texts_whole']:,} matched whole, "
        f"{n['texts_skipped']:,} too short)"
        for name, n in record["sets"].items()
    ]
    return lines


def summarize(output_dir: str, splits: list[str]) -> str:
    lines, m = [], None
    for split in splits:
        m = manifest.read_manifest(prepared_dir.split_dir(output_dir, split))
        lines.append(_split_line(split, m))
    run = m.accounting["run"]
    lines.append(_documents_line(output_dir, m))
    lines += mixture.summary_lines(m.mixture)
    lines += decontamination_lines(m.decontamination)
    lines += model_filter.summary_lines(m.quality_model)
    for title, key in (("duplicates", "duplicates_by_kind"), ("filtered", "filtered_by_rule")):
        if run[key]:
            lines.append(f"{title}: " + ", ".join(f"{k} {n:,}" for k, n in run[key].items()))
    if run.get("near_buckets_capped"):
        lines.append(
            f"near dedup: {run['near_buckets_capped']:,} LSH buckets over "
            f"--near_max_bucket, {run['near_bucket_members_unchecked']:,} of their "
            "members not compared there"
        )
    return "\n".join(lines)
