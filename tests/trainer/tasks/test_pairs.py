"""Pair files for contrastive training: what they read as, each bad input as one line naming
the file, and batches with no text twice, every pair once an epoch, the same for a seed."""

import json

import numpy as np
import pytest

from common.errors import UserError, run_cli
from trainer.tasks import pairs


def _write(tmp_path, lines, name="pairs.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


def _line(query="q", positive="p", **more) -> str:
    return json.dumps({"query": query, "positive": positive, **more})


def test_a_file_reads_as_its_pairs_in_order(tmp_path):
    path = tmp_path / "pairs.jsonl"
    text = "\n".join(
        [
            _line(" what is a cat ", "a small feline\t", negative="a dog", id=7),
            "",
            _line("what is a dog", "a canine", negative=["  a cat  "]),
        ]
    )
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())  # a byte-order mark is no character
    got = pairs.read(str(path))
    assert got.queries == ("what is a cat", "what is a dog")
    assert got.positives == ("a small feline", "a canine")
    assert got.negatives == (("a dog",), ("a cat",))
    assert got.line_numbers == (1, 3) and len(got) == 2 and got.hard_negatives == 1
    assert got.texts(1) == ("what is a dog", "a canine", "a cat")


def test_pairs_without_negatives_have_none(tmp_path):
    path = _write(tmp_path, [_line("a", "b"), _line("c", "d", negative=None), _line(negative=[])])
    got = pairs.read(path)
    assert got.negatives == ((), (), ()) and got.hard_negatives == 0


def test_a_query_may_be_its_own_positive(tmp_path):
    """Unsupervised SimCSE trains on (x, x): dropout makes the two views differ."""
    assert pairs.read(_write(tmp_path, [_line("same", "same")])).positives == ("same",)


BAD = {
    "not json": (["{oops"], "line 1 is not JSON"),
    "not an object": (["[1, 2]"], "line 1 is not a JSON object"),
    "no query": ([_line(), '{"positive": "p"}'], "line 2 has no 'query'"),
    "empty query": ([_line(query=" \t ")], "line 1 has an empty 'query'"),
    "no positive": (['{"query": "q"}'], "line 1 has no 'positive'"),
    "null positive": (['{"query": "q", "positive": null}'], "line 1 has no 'positive'"),
    "empty positive": ([_line(positive="")], "line 1 has an empty 'positive'"),
    "number positive": ([_line(positive=3)], "line 1 has a non-string 'positive' (3)"),
    "list query": ([_line(query=["a"])], "line 1 has a non-string 'query' ([\"a\"])"),
    "empty negative": ([_line(negative=" ")], 'line 1: negative 1 (" ") is empty'),
    "empty listed": ([_line(negative=["n", ""])], 'line 1: negative 2 ("") is empty'),
    "number negative": ([_line(negative=5)], "line 1: negative 1 (5) is not a string"),
    "listed number": ([_line(negative=["n", 5])], "line 1: negative 2 (5) is not a string"),
    "own positive": ([_line(negative="P ")], "line 1: negative 1 is the pair's own"),
    "uneven negatives": (
        [_line(negative="a"), _line(negative=["b", "c"])],
        "line 2 gives 2 negative(s) where line 1 gives 1",
    ),
    "no pairs": (["", "  "], "holds no pairs"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_naming_the_file(tmp_path, case):
    lines, message = BAD[case]
    path = _write(tmp_path, lines)
    with pytest.raises(UserError) as caught:
        pairs.read(path)
    text = str(caught.value)
    assert "\n" not in text and message in text, text
    assert text.startswith(path)


def test_a_missing_file_and_bytes_that_are_not_utf8_are_one_line(tmp_path):
    with pytest.raises(UserError, match=r"absent.jsonl is missing"):
        pairs.read(str(tmp_path / "absent.jsonl"))
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"query": "caf\xe9", "positive": "p"}\n')
    with pytest.raises(UserError, match=r"latin1.jsonl line 1 is not JSON") as caught:
        pairs.read(str(path))
    assert "\n" not in str(caught.value)


def test_a_command_reading_a_bad_file_prints_one_line_and_exits_2(tmp_path, capsys):
    path = _write(tmp_path, [_line(), _line(positive=" ")])
    assert run_cli(lambda: pairs.read(path), []) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.slow
def test_a_file_on_gcs_reads_as_a_local_one(tmp_path, gcs):
    lines = [_line("a", "b", negative="c"), _line("d", "e", negative="f")]
    gcs.write_object("pairs/train.jsonl", "".join(f"{line}\n" for line in lines).encode())
    gcs.apply_env()
    assert pairs.read(gcs.url("pairs", "train.jsonl")).negatives == (("c",), ("f",))


def test_text_keys_fold_case_width_and_whitespace():
    assert pairs.text_key("  The\u00a0Cat\n sat ") == pairs.text_key("the cat SAT")
    assert pairs.text_key("\uff21BC") == pairs.text_key("abc")  # fullwidth A, NFKC
    assert pairs.text_key("caf\u0065\u0301") == pairs.text_key("caf\u00e9")  # composed
    assert pairs.text_key("cats") != pairs.text_key("cat")


def _planted(tmp_path) -> pairs.Pairs:
    """40 pairs; duplicates planted across fields and rows, some only after `text_key`."""
    lines = []
    for i in range(40):
        query, positive, negative = f"query {i}", f"document {i}", f"negative {i}"
        if i % 5 == 0:
            positive = "THE shared answer" if i % 10 else "the  shared answer"  # 8 pairs share it
        if i % 7 == 0:
            negative = f"Query {i + 1}"  # another pair's query, as a negative
        if i % 11 == 0:
            query = "a popular question"  # 4 pairs share a query
        lines.append(_line(query, positive, negative=[negative, f"extra {i % 20}"]))
    return pairs.read(_write(tmp_path, lines))


def _assert_no_duplicates(data, batches):
    for batch in batches:
        keys = [pairs.text_key(t) for i in batch for t in set(map(pairs.text_key, data.texts(i)))]
        assert len(keys) == len(set(keys)), batch


@pytest.mark.parametrize("drop_last", [True, False])
def test_no_batch_holds_a_text_twice_and_every_pair_is_used_once(tmp_path, drop_last):
    data = _planted(tmp_path)
    packing = pairs.batches(data, 4, seed=3, drop_last=drop_last)
    _assert_no_duplicates(data, packing.batches)
    used = [i for batch in packing.batches for i in batch] + list(packing.dropped)
    assert sorted(used) == list(range(40))  # each once, kept or dropped
    assert packing.deferred > 0  # the planted duplicates did meet
    sizes = [len(batch) for batch in packing.batches]
    if drop_last:
        assert set(sizes) == {4} and len(packing.dropped) == 40 - 4 * len(sizes)
    else:
        assert packing.dropped == () and sizes.count(4) >= len(sizes) - 2  # short ones: the end


def test_the_same_seed_gives_the_same_batches_and_another_seed_others(tmp_path):
    data = _planted(tmp_path)
    first = pairs.batches(data, 4, seed=11)
    assert pairs.batches(data, 4, seed=11) == first
    assert pairs.batches(data, 4, seed=12).batches != first.batches


def test_a_pair_that_cannot_join_waits_and_opens_the_next_batch(tmp_path):
    lines = [_line("q0", "same"), _line("q1", "Same"), _line("q2", "p2"), _line("q3", "p3")]
    data = pairs.read(_write(tmp_path, lines))
    # a seed whose shuffle starts with the two pairs that share a positive
    seed = next(s for s in range(100) if set(np.random.default_rng(s).permutation(4)[:2]) == {0, 1})
    first, second = np.random.default_rng(seed).permutation(4)[:2].tolist()
    packing = pairs.batches(data, 2, seed)
    assert packing.batches[0][0] == first and packing.batches[1][0] == second
    assert packing.deferred == 1 and packing.dropped == ()
    assert sorted(i for batch in packing.batches for i in batch) == [0, 1, 2, 3]


def test_when_every_pair_shares_a_text_only_short_batches_remain(tmp_path):
    data = pairs.read(_write(tmp_path, [_line(f"q{i}", "one answer") for i in range(5)]))
    dropped = pairs.batches(data, 2, seed=0)
    assert dropped.batches == () and sorted(dropped.dropped) == [0, 1, 2, 3, 4]
    kept = pairs.batches(data, 2, seed=0, drop_last=False)
    assert sorted(kept.batches) == [(0,), (1,), (2,), (3,), (4,)]


def test_a_file_without_duplicates_packs_in_shuffled_order(tmp_path):
    data = pairs.read(_write(tmp_path, [_line(f"q{i}", f"p{i}") for i in range(10)]))
    packing = pairs.batches(data, 3, seed=5)
    flat = [i for batch in packing.batches for i in batch] + list(packing.dropped)
    assert len(packing.batches) == 3 and len(packing.dropped) == 1 and packing.deferred == 0
    assert flat != list(range(10)) and sorted(flat) == list(range(10))
