"""Named, weighted sources (`prepare --sources`, beam_pipelines/mixture.py): the plan on
known sizes, real runs on the FnApiRunner (shares, repeats and cuts counted, reruns), and
each bad input refused in one line before anything is written."""

import math

import numpy as np
import pytest

from beam_pipelines import hashing, mixture, prepare
from common import manifest
from tests.beam_pipelines.test_prepare import encode_all, read_split, write_jsonl

WORDS = "river stone light field market window garden letter silver morning".split()
# The asked shares are 0.5 each; the draws' spread at these sizes (~300 documents out per
# source) is ~0.013 of a share, so 0.05 is about four of it.
SHARE_TOLERANCE = 0.05


def _texts(name: str, n: int) -> list[str]:
    """`n` distinct documents of equal length (so characters and documents agree)."""
    return [
        f"{name} note {i:04d} " + " ".join(WORDS[(i * 3 + k * 7) % len(WORDS)] for k in range(8))
        for i in range(n)
    ]


def test_plan_on_known_sizes():
    sizes = {"a": 1000, "b": 4000}
    spec = mixture.parse("a=x;b=y", "a=1,b=1")
    assert mixture.plan(spec, sizes) == {
        "a": {"weight": 0.5, "max_repeats": 1.0, "rate": 1.0},  # a sets the total
        "b": {"weight": 0.5, "max_repeats": 1.0, "rate": 0.25},
    }
    repeated = mixture.plan(mixture.parse("a=x;b=y", "a=1,b=1", max_repeats="a=3"), sizes)
    assert repeated["a"]["rate"] == 3.0 and repeated["b"]["rate"] == 0.75
    # Temperature 2: weights ∝ sqrt(size): 1/3 and 2/3; a binds at 1, b gets 0.5.
    tempered = mixture.plan(mixture.parse("a=x;b=y", temperature=2.0), sizes)
    assert tempered["a"]["rate"] == 1.0 and math.isclose(tempered["b"]["rate"], 0.5)
    assert math.isclose(tempered["a"]["weight"], 1 / 3)
    # No weights: the sizes themselves, every document kept once.
    natural = mixture.plan(mixture.parse("a=x;b=y"), sizes)
    assert [p["rate"] for p in natural.values()] == [1.0, 1.0]
    # A weighted source with no clean text does not empty the others.
    empty = mixture.plan(spec, {"a": 0, "b": 4000})
    assert empty["a"]["rate"] == 0.0 and empty["b"]["rate"] == 1.0


def _run(tmp_path, tokenizer, out, seed=0):
    a, b = _texts("alpha", 200), _texts("beta", 800)
    b[5] = a[7]  # a copy across sources: exact dedup removes the later one (in b)
    a_path = write_jsonl(tmp_path / "a.jsonl", [*a, ""])  # a blank: counted as empty
    b_path = write_jsonl(tmp_path / "b.jsonl", b)
    args = ["--sources", f"a={a_path};b={b_path}", "--weights", "a=1,b=1", "--max_repeats"]
    args += ["a=1.5", "--tokenizer", tokenizer, "--output_dir", out, "--max_length", 64]
    args += ["--pad_tail", "--num_shards", 2, "--validation_fraction", 0.1, "--seed", seed]
    code = prepare.run(["--runner=FnApiRunner", "--quality_filter", "none", *map(str, args)])
    assert code == 0
    return {str(a_path): a + [""], str(b_path): b}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, bpe_tokenizer_dir):
    folder = tmp_path_factory.mktemp("mixture")
    inputs = _run(folder, bpe_tokenizer_dir, folder / "out")
    return folder, inputs


def _rows(out) -> list[np.ndarray]:
    """Every split's rows, shard by shard in index order."""
    return [
        ids
        for split in ("train", "validation")
        for _, (ids, _) in sorted(read_split(str(out / split), 64).items(), key=lambda kv: kv[0])
    ]


def test_shares_repeats_and_cuts_are_counted(mixed, bpe_tokenizer_dir):
    folder, inputs = mixed
    m = manifest.read_manifest(str(folder / "out" / "train"))
    assert m.format_version == manifest.FORMAT_VERSION and m.decontamination == {}
    a, b = m.mixture["sources"]["a"], m.mixture["sources"]["b"]
    # Clean sizes: a's blank is no document of it, b's copy of a text of a went to dedup.
    assert (a["documents"], b["documents"]) == (200, 799)
    texts = list(inputs.values())
    assert a["characters"] == sum(map(len, texts[0]))
    assert b["characters"] == sum(map(len, texts[1])) - len(texts[1][5])
    # a (1.5 at most) sets the total, 3 × its characters; b gets half of it.
    assert a["rate"] == 1.5 and math.isclose(b["rate"], 1.5 * a["characters"] / b["characters"])
    assert a["cut"] == 0 and a["repeated"] == a["documents_out"] - 200 > 0
    assert b["repeated"] == 0 and b["cut"] == 799 - b["documents_out"] > 0
    for source in (a, b):
        assert source["weight"] == 0.5
        assert abs(source["share"] - 0.5) <= SHARE_TOLERANCE, m.mixture
    run = m.accounting["run"]
    assert run["documents_cut"] == b["cut"] and run["documents_repeated"] == a["repeated"]
    assert run["documents_duplicate"] == 1 and run["documents_empty"] == 1
    assert run["documents_read"] + run["documents_repeated"] == (
        run["documents_tokenized"] + run["documents_empty"] + run["documents_cut"] + 1
    )
    # Each document is in the shards as many times as its draw says: repeats survive, cut
    # ones are gone, and every token of the copies is written (--pad_tail drops none).
    expected = np.zeros(1000, np.int64)
    for path, texts in inputs.items():
        in_b = path.endswith("b.jsonl")
        rate = (b if in_b else a)["rate"]
        for line, (text, ids) in enumerate(zip(texts, encode_all(bpe_tokenizer_dir, texts)), 1):
            if not text.strip() or (in_b and line == 6):  # blank, or the removed copy
                continue
            draw = hashing.unit_draw((path, -1, line), 0)
            copies = math.floor(rate) + (draw < rate - math.floor(rate))
            np.add.at(expected, np.array(ids * copies, np.int64), 1)
    written = np.zeros(1000, np.int64)
    for split in ("train", "validation"):
        for ids, masks in read_split(str(folder / "out" / split), 64).values():
            np.add.at(written, ids[masks == 1], 1)
    assert (written == expected).all()
    assert a["tokens"] + b["tokens"] == int(written.sum())


def test_a_rerun_gives_the_same_rows_and_another_seed_others(mixed, bpe_tokenizer_dir):
    folder, _ = mixed
    _run(folder, bpe_tokenizer_dir, folder / "again")
    first, again = _rows(folder / "out"), _rows(folder / "again")
    assert len(first) == len(again) and all((x == y).all() for x, y in zip(first, again))
    read = [manifest.read_manifest(str(folder / o / "train")).mixture for o in ("out", "again")]
    assert read[0] == read[1]
    _run(folder, bpe_tokenizer_dir, folder / "seed1", seed=1)
    other = manifest.read_manifest(str(folder / "seed1" / "train")).mixture
    assert other["sources"]["b"]["documents_out"] != read[0]["sources"]["b"]["documents_out"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--weights", "a=-1,b=2"], "--weights must not be negative (a=-1)"),
        (["--weights", "a=0,b=0"], "--weights are all 0"),
        (["--weights", "a=1,b=1,c=1"], "--weights names 'c', which is not a source (a, b)"),
        (["--weights", "a=1"], "--weights gives no weight to b"),
        (["--weights", "a=1,b=x"], "--weights b='x' is not a number"),
        (["--weights", "a=1,b=1", "--temperature", "2"], "--weights or --temperature, not both"),
        (["--temperature", "0"], "--temperature must be greater than 0"),
        (["--max_repeats", "a=0"], "--max_repeats must be above 0 (a=0)"),
        (["--max_repeats", "z=2"], "--max_repeats names 'z', which is not a source"),
        (["--sources", "a={a};a={b}"], "--sources names 'a' twice"),
        (["--sources", "a={a};b/c={b}"], "--sources name 'b/c' may hold only"),
        (["--sources", "a={a};b={missing}"], "--sources b '{missing}' matches no file"),
        (["--sources", "a={a};b={a}"], "matches the --sources globs of both 'a' and 'b'"),
        (["--input", "{a}"], "give exactly one of --input, --sources, --splits or --hf_dataset"),
    ],
)
def test_bad_input_is_one_line_before_anything_is_written(tmp_path, capsys, flags, message):
    a = write_jsonl(tmp_path / "a.jsonl", ["one document here"])
    b = write_jsonl(tmp_path / "b.jsonl", ["another document here"])
    names = {"a": a, "b": b, "missing": tmp_path / "none" / "*.jsonl"}
    flags = [f.format(**names) for f in flags]
    if "--sources" not in flags:
        flags = ["--sources", f"a={a};b={b}", *flags]
    out = tmp_path / "out"
    code = prepare.run(
        ["--runner=FnApiRunner", *flags, "--tokenizer", str(tmp_path / "tok")]
        + ["--output_dir", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert message.format(**names) in err
    assert not out.exists()


def test_weighing_flags_need_sources(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", ["one document here"])
    code = prepare.run(
        ["--input", str(a), "--weights", "a=1", "--tokenizer", "t", "--output_dir", "o"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "weigh --sources" in err and len(err.strip().splitlines()) == 1


def test_dataflows_grouping_path_mixes_the_same(mixed, bpe_tokenizer_dir, monkeypatch):
    """The mixture sits between the cleaning and the tokenizer, outside the seam: the
    grouping execution (Dataflow's) gives the on-disk one's rows and records."""
    folder, _ = mixed
    original = prepare.build

    def grouping(*args, spill_dir=None, **kwargs):  # what Dataflow runs
        return original(*args, **kwargs)

    monkeypatch.setattr(prepare, "build", grouping)
    _run(folder, bpe_tokenizer_dir, folder / "grouped")
    first, grouped = _rows(folder / "out"), _rows(folder / "grouped")
    assert len(first) == len(grouped) and all((x == y).all() for x, y in zip(first, grouped))
    read = [manifest.read_manifest(str(folder / o / "train")) for o in ("out", "grouped")]
    assert read[0].mixture == read[1].mixture and read[0].accounting == read[1].accounting
