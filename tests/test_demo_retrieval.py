"""`make demo`'s retrieval line from two results documents shaped as the embedding fine-tune
writes them."""

import json

from benchmarks import demo_retrieval


def _document(means: dict, bm25: float) -> dict:
    return {
        "data": {"test": {"examples": 100, "documents": 1500}},
        "bm25": {"dev": {"ndcg@10": 0.4}, "test": {"ndcg@10": bm25}},
        "scores": {
            "seeds": [{"seed": 1}, {"seed": 2}],
            "summary": {
                split: {"ndcg@10": {"mean": mean, "std": 0.01}} for split, mean in means.items()
            },
        },
    }


def test_the_line_gives_both_sides_their_gap_and_bm25_on_test(tmp_path, capsys):
    for side, mean in (("pretrained", 0.42), ("scratch", 0.30)):
        (tmp_path / side).mkdir()
        document = _document({"dev": 0.9, "test": mean}, 0.61)
        (tmp_path / side / "results.json").write_text(json.dumps(document))
    out = tmp_path / "line.txt"
    assert demo_retrieval.main(["--embed_dir", str(tmp_path), "--output", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert "100 test queries over 1,500 documents" in lines[0] and "2 seed(s)" in lines[0]
    assert (
        lines[1] == "  pretrained 0.420 ± 0.010 vs random weights 0.300 ± 0.010: +0.120; BM25 0.610"
    )
    assert capsys.readouterr().out.splitlines() == lines


def test_a_missing_side_is_one_line(tmp_path, capsys):
    assert demo_retrieval.main(["--embed_dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "pretrained/results.json is missing" in err and len(err.splitlines()) == 1
