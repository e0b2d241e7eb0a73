"""`make demo`'s retrieval line: the demo model trained as an embedder, random weights trained
the same way, and BM25, side by side on the demo's retrieval task (a docstring's summary finds
the rest of its docstring: `benchmarks.retrieval_task docstrings`).

    python -m benchmarks.demo_retrieval --embed_dir runs/demo/embed --output FILE

Reads `trainer.finetune --task_type embedding`'s results.json in `{embed_dir}/pretrained` and
`{embed_dir}/scratch` (the same command with `--from_scratch`) and prints one head line and one
line of scores: the test split's nDCG@10 (dev's when there is no test), mean ± std over the
seeds, of each side, their gap, and BM25's on the same split.
"""

from __future__ import annotations

import dataclasses
import sys

from common import flags, fs
from common.errors import UserError, run_cli
from common.flags import flag

SIDES = ("pretrained", "scratch")
METRIC = "ndcg@10"


@dataclasses.dataclass(frozen=True)
class ReportFlags:
    embed_dir: str = flag("The folder holding pretrained/ and scratch/ results.", required=True)
    output: str = flag("Also write the lines to this file.")


def _read(folder: str) -> dict:
    path = fs.join(folder, "results.json")
    if not fs.exists(path):
        raise UserError(f"{path} is missing: run trainer.finetune --task_type embedding first")
    document = fs.read_json(path)
    if "bm25" not in document:
        raise UserError(f"{path} is not an embedding fine-tune's results (no BM25 scores)")
    return document


def _split(document: dict) -> str:
    return "test" if "test" in document["scores"]["summary"] else "dev"


def _score(document: dict, split: str) -> str:
    found = document["scores"]["summary"].get(split, {}).get(METRIC)
    if found is None:
        return "no score (every seed diverged)"
    return f"{found['mean']:.3f} ± {found['std']:.3f}"


def report_lines(pretrained: dict, scratch: dict) -> list[str]:
    split = _split(pretrained)
    data = pretrained["data"][split]
    head = (
        f"retrieval (a docstring's summary finds its docstring: {data['examples']} {split} "
        f"queries over {data['documents']:,} documents; {split} {METRIC}, "
        f"{len(pretrained['scores']['seeds'])} seed(s)):"
    )
    gap = ""
    means = [d["scores"]["summary"].get(split, {}).get(METRIC) for d in (pretrained, scratch)]
    if all(means):
        gap = f": {means[0]['mean'] - means[1]['mean']:+.3f}"
    return [
        head,
        f"  pretrained {_score(pretrained, split)} vs random weights {_score(scratch, split)}"
        f"{gap}; BM25 {pretrained['bm25'][split][METRIC]:.3f}",
    ]


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    config = flags.parse(parser, ReportFlags, argv)

    def body():
        lines = report_lines(*(_read(fs.join(config.embed_dir, side)) for side in SIDES))
        print("\n".join(lines))
        if config.output:
            fs.write_bytes(config.output, ("\n".join(lines) + "\n").encode("utf-8"))

    return run_cli(body, argv)


if __name__ == "__main__":
    sys.exit(main())
