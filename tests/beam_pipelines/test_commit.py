"""The commit protocol under injected faults: every I/O step of the commit failing in turn,
a repeated commit, a commit after the lock was taken over, refused results, a second writer.

After every fault the output must be valid (each split: the previous run's or the new one's,
every listed shard intact), and running the commit again must end in the new output with no
file left that no manifest lists."""

import builtins
import json
import os
import shutil

import pytest

from beam_pipelines import commit, prepare
from beam_pipelines.local import exact_dedup
from common import fs, manifest, prepared_dir, run_lock, shards, verify
from tests.beam_pipelines.test_prepare import run_prepare, write_jsonl
from tests.support.full_disk import FullDiskFile

SPLITS = ("train", "validation")


def _args(src, tok, out, *extra):
    return [
        "--runner=FnApiRunner",
        "--input",
        str(src),
        "--tokenizer",
        tok,
        "--output_dir",
        str(out),
        "--max_length",
        "32",
        "--validation_fraction",
        "0.2",
        "--num_shards",
        "2",
        *map(str, extra),
    ]


def _run_ids(out):
    """{split: run id} after checking each split completely (manifest, sizes, crc, records)."""
    return {split: verify.verify_split(str(out / split)).run_id for split in SPLITS}


@pytest.fixture(scope="module")
def staged(tmp_path_factory, corpus_texts, bpe_tokenizer_dir):
    """Run A committed; run B ran up to its commit (shards written, lock held), whose
    arguments are captured: what Dataflow would hand a retried commit."""
    root = tmp_path_factory.mktemp("staged")
    src = write_jsonl(root / "c.jsonl", corpus_texts[:150])
    out = root / "out"
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 0
    run_a = _run_ids(out)["train"]
    captured = []

    def capture(self, written, stats, dead_letter_files, changed_inputs=()):
        captured.append((self, written, dict(stats), list(dead_letter_files)))
        return iter(())

    original = commit.Commit.process
    commit.Commit.process = capture
    try:
        with pytest.raises(RuntimeError, match="without a run record"):
            prepare.run(_args(src, bpe_tokenizer_dir, out, "--seed", "1"))
    finally:
        commit.Commit.process = original
    ((step, written, stats, dead),) = captured
    snapshot = root / "snapshot"
    shutil.copytree(out, snapshot)
    return {
        "out": out,
        "snapshot": snapshot,
        "run_a": run_a,
        "run_b": step.run_id,
        "commit": lambda: list(step.process(written, stats, dead)),
    }


def _restore(staged):
    shutil.rmtree(staged["out"])
    shutil.copytree(staged["snapshot"], staged["out"])


def _assert_clean(out, run_b):
    assert _run_ids(out) == {s: run_b for s in SPLITS}
    for split in SPLITS:
        listed = {s.name for s in manifest.read_manifest(str(out / split)).shards}
        assert set(os.listdir(out / split)) == listed | {"manifest.json"}
    assert not (out / "_LOCK").exists()
    assert fs.read_json(str(out / "_runs" / f"{run_b}.json"))["state"] == "committed"


class _Fault(Exception):
    pass


def _fail_at(monkeypatch, k):
    """Makes the k-th file write or delete raise (counted across the fs functions)."""
    calls = {"n": 0}
    for name in ("write_bytes", "delete", "delete_trees_in", "remove_empty_folder"):
        real = getattr(fs, name)

        def wrapped(*args, _real=real, **kwargs):
            calls["n"] += 1
            if calls["n"] == k:
                raise _Fault(f"injected at I/O step {k}")
            return _real(*args, **kwargs)

        monkeypatch.setattr(fs, name, wrapped)
    return calls


@pytest.mark.slow
def test_commit_fails_at_every_step_then_a_retry_completes(staged, monkeypatch):
    _restore(staged)
    with monkeypatch.context() as m:
        calls = _fail_at(m, k=0)  # count the steps of a clean commit
        staged["commit"]()
    steps = calls["n"]
    assert steps >= 6
    outcomes = []
    for k in range(1, steps + 1):
        _restore(staged)
        with monkeypatch.context() as m:
            _fail_at(m, k)
            with pytest.raises(_Fault):
                staged["commit"]()
        seen = _run_ids(staged["out"])  # valid after the fault: each split old or new
        assert set(seen.values()) <= {staged["run_a"], staged["run_b"]}, (k, seen)
        outcomes.append(tuple(seen[s] == staged["run_b"] for s in SPLITS))
        staged["commit"]()  # the retry
        _assert_clean(staged["out"], staged["run_b"])
    print(f"commit I/O steps: {steps}; splits new after a fault at each step: {outcomes}")
    # The faults hit before, between and after the two manifest writes.
    assert outcomes[0] == (False, False) and outcomes[-1] == (True, True)
    assert (True, False) in outcomes


def test_a_rerun_cut_between_its_manifest_writes_is_a_mixed_output_for_verify(
    staged, monkeypatch, capsys
):
    """The second manifest write fails (full disk, kill): new train/ beside old validation/,
    each valid alone. verify reports the mix; the retried commit ends it."""
    _restore(staged)
    real, writes = manifest.write_manifest, []

    def second_fails(split_dir, found):
        writes.append(split_dir)
        if len(writes) == 2:
            raise _Fault("no space left on device")
        return real(split_dir, found)

    with monkeypatch.context() as m:
        m.setattr(manifest, "write_manifest", second_fails)
        with pytest.raises(_Fault):
            staged["commit"]()
    run_a, run_b = staged["run_a"], staged["run_b"]
    assert _run_ids(staged["out"]) == {"train": run_b, "validation": run_a}
    capsys.readouterr()
    assert verify.main([str(staged["out"])]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mixes splits of different prepare runs" in err[0], err
    assert f"train/ from run {run_b}" in err[0] and f"validation/ from run {run_a}" in err[0]
    staged["commit"]()  # the retry
    assert verify.main([str(staged["out"])]) == 0


def test_a_repeated_commit_changes_nothing(staged):
    _restore(staged)
    first = staged["commit"]()
    files = {p: open(p, "rb").read() for p in staged["out"].rglob("*") if p.is_file()}
    assert staged["commit"]() == first
    assert {p: open(p, "rb").read() for p in staged["out"].rglob("*") if p.is_file()} == files


def test_a_run_whose_lock_was_taken_over_never_commits(staged):
    _restore(staged)
    lock = staged["out"] / "_LOCK"
    lock.write_text(json.dumps({"run_id": "r20990101000000abcdef", "host": "other"}))
    with pytest.raises(run_lock.LockLostError, match="r20990101000000abcdef"):
        staged["commit"]()
    assert _run_ids(staged["out"]) == {s: staged["run_a"] for s in SPLITS}


def _snapshot(out):
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in out.rglob("*")
        if p.is_file() and p.parent.name != "_runs" and p.parent.name != "dead_letter"
    }


@pytest.mark.parametrize(
    "mistake, message",
    [
        (["--input", "typo*.jsonl"], "matches no file"),
        (["--text_field", "body"], "documents were rejected"),
        (["--seed", "-1"], "--seed must be at least 0"),
        (["--num_shards", "0"], "--num_shards must be at least 1"),
        (["--read_range_bytes", "0"], "--read_range_bytes must be at least 1"),
        (["--max_length", "2"], "--max_length must be at least 8"),
        (["--validation_fraction", "0.999999"], "would hold no sequence"),
    ],
)
def test_mistakes_leave_the_previous_output_exactly_as_it_was(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys, mistake, message
):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:40])
    out = tmp_path / "out"
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 0
    before = _snapshot(out)
    args = _args(src, bpe_tokenizer_dir, out)
    for flag, value in zip(mistake[::2], mistake[1::2]):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    capsys.readouterr()
    assert prepare.run(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert _snapshot(out) == before and not (out / "_LOCK").exists()


@pytest.mark.parametrize("rewrite", ["reordered", "appended"])
def test_an_input_rewritten_between_the_two_reads_is_refused(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys, monkeypatch, rewrite
):
    """Local exact dedup reads the input twice and keeps documents by their place: a file
    rewritten in between (here: lines in another order, same size; or lines appended) must
    have the run refused, naming the file, the previous output untouched."""
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:40])
    out = tmp_path / "out"
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 0
    before = _snapshot(out)
    load_range, done = exact_dedup.load_range, []

    def rewrite_then_load(*args):  # DecideRange: after the first read, before the second
        if not done:
            lines = src.read_text().splitlines(keepends=True)
            src.write_text("".join(lines[::-1] if rewrite == "reordered" else lines + lines[:5]))
            stat = src.stat()
            os.utime(src, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a coarse clock
            done.append(1)
        return load_range(*args)

    monkeypatch.setattr(exact_dedup, "load_range", rewrite_then_load)
    capsys.readouterr()
    assert prepare.run(_args(src, bpe_tokenizer_dir, out, "--seed", "1")) == 2 and done
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"input {src} changed while the run read it" in err[0], err
    assert _snapshot(out) == before and not (out / "_LOCK").exists()


def test_all_rejected_names_the_reason(tmp_path, corpus_texts, bpe_tokenizer_dir, capsys):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:20])
    assert prepare.run(_args(src, bpe_tokenizer_dir, tmp_path / "o", "--text_field", "body")) == 2
    err = capsys.readouterr().err
    assert "20 of 20 documents were rejected" in err and "missing field 'body'" in err
    assert "dead_letter" in err  # where to read them


def test_a_second_writer_is_refused_naming_the_first(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys
):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:40])
    out = tmp_path / "out"
    run_lock.acquire(str(out), "r20261122000000aaaaaa", "DataflowRunner")  # alive elsewhere
    lock = json.loads((out / "_LOCK").read_text())
    (out / "_LOCK").write_text(json.dumps({**lock, "host": "another-host"}))
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 2
    err = capsys.readouterr().err
    assert "being written by prepare run r20261122000000aaaaaa" in err and "another-host" in err
    assert not (out / "train").exists()
    assert prepare.run(_args(src, bpe_tokenizer_dir, out, "--takeover_lock")) == 0
    assert "taking over the lock" in capsys.readouterr().err


def test_a_lock_of_a_dead_local_process_is_taken_over(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys
):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:40])
    out = tmp_path / "out"
    run_lock.acquire(str(out), "r20261122000000bbbbbb", "FnApiRunner")
    lock = json.loads((out / "_LOCK").read_text())
    (out / "_LOCK").write_text(json.dumps({**lock, "pid": 2**22 + 12345}))  # no such process
    run_prepare(*_args(src, bpe_tokenizer_dir, out)[1:])
    assert "no longer exists" in capsys.readouterr().err


def test_overlapping_splits_are_named(tmp_path, corpus_texts, bpe_tokenizer_dir, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", corpus_texts[:10])
    code = prepare.run(
        [
            "--splits",
            f"train={tmp_path}/*.jsonl;validation={a}",
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "a.jsonl matches the --splits globs of both 'train' and" in err


def test_output_dir_holding_the_input_is_refused(tmp_path, corpus_texts, bpe_tokenizer_dir, capsys):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:10])
    code = prepare.run(
        ["--input", str(src), "--tokenizer", bpe_tokenizer_dir, "--output_dir", str(tmp_path)]
    )
    assert code == 2 and "lies inside --output_dir" in capsys.readouterr().err


def test_verify_names_the_first_damaged_shard(tmp_path, corpus_texts, bpe_tokenizer_dir, capsys):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:60])
    out = tmp_path / "out"
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 0
    assert verify.main([str(out)]) == 0
    victim = manifest.read_manifest(str(out / "train")).shard_paths(str(out / "train"))[1]
    data = bytearray(open(victim, "rb").read())
    data[40] ^= 0xFF  # same size: only a full check can see it
    open(victim, "wb").write(bytes(data))
    manifest.read_manifest(str(out / "train"))  # the cheap check on open passes
    assert verify.main([str(out)]) == 1
    assert os.path.basename(victim) in capsys.readouterr().err


def _killed_attempt(kill_at, args, env=None):
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run(
        [sys.executable, "-m", "tests.beam_pipelines.killable_prepare", kill_at, *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


KILLS = ["locked", "shard_write:2", "shards:3", "commit:1"]


@pytest.mark.slow
def test_sigkill_of_a_rerun_leaves_old_or_new_then_a_rerun_cleans_up(
    tmp_path, corpus_texts, bpe_tokenizer_dir
):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:150])
    out = tmp_path / "out"
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 0
    run_a = _run_ids(out)["train"]
    seen = []
    for kill_at in KILLS:
        proc = _killed_attempt(kill_at, _args(src, bpe_tokenizer_dir, out, "--seed", "3"))
        assert proc.returncode == -9, (kill_at, proc.stderr[-2000:])
        ids = _run_ids(out)  # every split readable and intact: the old run's or a new one's
        seen.append((kill_at, ids["train"] == run_a, ids["validation"] == run_a))
    assert seen[:3] == [(k, True, True) for k in KILLS[:3]]  # nothing committed before
    assert seen[3] == ("commit:1", False, True)  # killed between the two splits' commits
    proc = _killed_attempt("none", _args(src, bpe_tokenizer_dir, out, "--seed", "3"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "no longer exists" in proc.stderr  # the dead run's lock was taken over
    run_c = _run_ids(out)["train"]
    _assert_clean(out, run_c)  # orphans of every killed attempt are gone
    assert not [p for p in out.rglob(".tmp-*")]


def test_a_corrupt_tokenizer_folder_is_one_line(tmp_path, corpus_texts, bpe_tokenizer_dir, capsys):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:5])
    tok = tmp_path / "tok"
    shutil.copytree(bpe_tokenizer_dir, tok)
    (tok / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "nope"}}')
    assert prepare.run(_args(src, str(tok), tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a valid tokenizers file" in err[0]


def test_a_refusal_whose_dead_letters_hold_line_separators_is_one_line(
    tmp_path, bpe_tokenizer_dir, capsys
):
    """U+2028, U+0085, ... are legal inside a JSON string; the dead-letter
    JSONL is split on "\\n" only (splitlines() split there and the commit crashed)."""
    src = tmp_path / "c.jsonl"
    odd = "a\u2028b\u2029c\u0085d\x0be\x0cf\x1cg\x1dh\x1ei"
    src.write_text(
        "".join(json.dumps({"body": f"{odd} {i}"}, ensure_ascii=False) + "\n" for i in range(20)),
        encoding="utf-8",
    )
    code = prepare.run(_args(src, bpe_tokenizer_dir, tmp_path / "o"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "20 of 20 documents were rejected" in err[-1], err[-3:]
    assert "missing field 'text'" in err[-1]


def test_top_reasons_streams_and_counts_every_line(tmp_path):
    path = tmp_path / "dead.jsonl"
    reasons = ["x\u2028y", "x\u2028y", "plain"]
    path.write_text(
        "".join(json.dumps({"reason": r}, ensure_ascii=False) + "\n" for r in reasons),
        encoding="utf-8",
    )
    assert commit.top_reasons([str(path)]) == "'x\\u2028y' x 2; 'plain' x 1"
    assert commit.top_reasons([str(path)], max_lines=1) == "'x\\u2028y' x 1"
    with open(path, "ab") as f:
        f.write(b'{"reason": "cut\n')
    assert commit.top_reasons([str(path)]).endswith("'(unreadable dead-letter line)' x 1")


def test_a_planted_manifest_never_makes_the_clean_up_delete_elsewhere(
    tmp_path, corpus_texts, bpe_tokenizer_dir
):
    """Only bare shard names of our own manifests are deleted."""
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:40])
    out = tmp_path / "out"
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 0
    victims = [
        tmp_path / "victim.tfrecord",
        tmp_path / "abs-00000-1.tfrecord",
        out / "train" / "notes.txt",
    ]
    for victim in victims:
        victim.write_text("keep me")
    planted = json.loads((out / "train" / "manifest.json").read_text())
    for name, listed in (
        ("evil", ["../../victim.tfrecord", str(victims[1])]),
        ("evil2", ["../train/notes.txt"]),
        ("evil3", [fs.basename(p) for p in map(str, victims[:1])]),
    ):
        (out / name).mkdir()
        shard = planted["shards"][0]
        (out / name / "manifest.json").write_text(
            json.dumps({**planted, "split": name, "shards": [{**shard, "name": n} for n in listed]})
        )
    assert prepare.run(_args(src, bpe_tokenizer_dir, out, "--seed", "3")) == 0
    assert all(v.read_text() == "keep me" for v in victims)
    assert all((out / name / "manifest.json").exists() for name in ("evil", "evil2", "evil3"))


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "_runs", "dead_letter", ".hidden", ""])
def test_split_names_that_are_not_one_folder_are_refused(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys, name
):
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:10])
    other = write_jsonl(tmp_path / "d.jsonl", corpus_texts[10:20])
    out = tmp_path / "deep" / "out"
    code = prepare.run(
        [
            "--splits",
            f"train={src};{name}={other}" if name else f" ={src}",
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            str(out),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert ("split name" in err[0] and repr(name) in err[0]) or "NAME=GLOB" in err[0], err
    assert not (tmp_path / "deep").exists()


def test_hf_split_names_are_checked_before_any_download(tmp_path, bpe_tokenizer_dir, capsys):
    code = prepare.run(
        [
            "--hf_dataset",
            "no/such-dataset",
            "--hf_splits",
            "train,../up",
            "--tokenizer",
            bpe_tokenizer_dir,
            "--output_dir",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "split name '../up'" in err[0], err


@pytest.mark.slow
def test_sigterm_mid_run_cleans_up_and_leaves_the_previous_output(
    tmp_path, corpus_texts, bpe_tokenizer_dir
):
    """SIGTERM (kill, timeout, CI) once shards are being written, the lock
    held and the spill folder full: every clean-up runs, the exit says SIGTERM, the previous
    output stays. Before, the spill, progress and Beam folders stayed in TMPDIR, OUT/_LOCK too."""
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:150])
    out = tmp_path / "out"
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 0
    run_a = _run_ids(out)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = _killed_attempt(
        "shards:1:TERM",
        _args(src, bpe_tokenizer_dir, out, "--seed", "3"),
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert proc.returncode == 143, proc.stderr[-3000:]
    assert "SIGTERM" in proc.stderr.strip().splitlines()[-1]
    assert not list(tmp.iterdir())
    assert not (out / "_LOCK").exists()
    assert not list((out / "dead_letter").glob("beam-temp-*"))  # nor Beam's in OUT
    assert _run_ids(out) == run_a


def _plant_leftovers(out, run_id):
    """What a run killed mid-write leaves: Beam's temp folder of its dead letters and the
    temporary file of its run record."""
    beam_temp = out / "dead_letter" / f"beam-temp-{run_id}-dead_letter-0f3a" / "sub"
    beam_temp.mkdir(parents=True)
    (beam_temp / "part-0").write_text("{}\n")
    empty = out / "dead_letter" / f"beam-temp-{run_id}-removed_sample-77b0"
    empty.mkdir()
    (out / "_runs").mkdir(exist_ok=True)
    (out / "_runs" / f".tmp-9c1d-{run_id}.json").write_text("{")
    return [beam_temp.parent, empty, out / "_runs" / f".tmp-9c1d-{run_id}.json"]


def test_a_committed_run_sweeps_what_dead_runs_left(tmp_path, corpus_texts, bpe_tokenizer_dir):
    """Beam temp folders and run-record temp files of killed runs stayed
    forever; the next committed run deletes them (names with no run id stay)."""
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:150])
    out = tmp_path / "out"
    dead = _plant_leftovers(out, "r20250101000000abcdef")
    foreign = out / "dead_letter" / "beam-temp-x"
    foreign.mkdir()
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 0
    assert not [p for p in dead if p.exists()] and foreign.exists()


def test_the_sweep_keeps_the_files_of_the_run_holding_the_lock(tmp_path):
    out = tmp_path / "out"
    live, dead, ended = ("r20250101000000aaaaaa", "r20250101000000bbbbbb", "r20250101000000cccccc")
    kept = _plant_leftovers(out, live)
    gone = _plant_leftovers(out, dead) + _plant_leftovers(out, ended)
    fs.write_json(prepared_dir.run_record_path(str(out), ended), {"state": "refused"})
    run_lock.acquire(str(out), live, "FnApiRunner")
    commit.sweep_dead_runs(str(out))
    assert all(p.exists() for p in kept) and not [p for p in gone if p.exists()]
    run_lock.release(str(out), live)
    again = _plant_leftovers(out, ended)
    run_lock.acquire(str(out), ended, "FnApiRunner")  # a holder that recorded its end
    commit.sweep_dead_runs(str(out))
    assert not [p for p in kept + again if p.exists()]


def test_an_input_deleted_while_the_run_reads_it_is_refused_in_one_line(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys, monkeypatch
):
    """Deletion is a change: an input removed between the two reads of the local exact
    dedup ends in the one-line refusal, not a traceback, the previous output untouched."""
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:40])
    out = tmp_path / "out"
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 0
    before = _snapshot(out)
    load_range, done = exact_dedup.load_range, []

    def delete_then_load(*args):  # DecideRange: after the first read, before the second
        if not done:
            src.unlink()
            done.append(1)
        return load_range(*args)

    monkeypatch.setattr(exact_dedup, "load_range", delete_then_load)
    capsys.readouterr()
    assert prepare.run(_args(src, bpe_tokenizer_dir, out, "--seed", "1")) == 2 and done
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"input {src} changed while the run read it" in err[0], err
    assert "is gone" in err[0], err
    assert _snapshot(out) == before and not (out / "_LOCK").exists()


def test_a_full_disk_while_shards_are_written_is_one_line_and_keeps_the_previous_output(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys, monkeypatch, caplog
):
    """The shard writes run in Beam workers, whose OSError reaches the launcher wrapped in a
    RuntimeError: still one line naming the file, exit 2, the previous output untouched."""
    src = write_jsonl(tmp_path / "c.jsonl", corpus_texts[:40])
    out = tmp_path / "out"
    assert prepare.run(_args(src, bpe_tokenizer_dir, out)) == 0
    before = _snapshot(out)

    def full_for_shards(path, mode="r", *args, **kwargs):
        real = builtins.open(path, mode, *args, **kwargs)
        return FullDiskFile(real) if str(path).endswith(shards.SHARD_SUFFIX) else real

    monkeypatch.setattr(fs, "open", full_for_shards, raising=False)
    capsys.readouterr()
    assert prepare.run(_args(src, bpe_tokenizer_dir, out, "--seed", "1")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: cannot write {out}/"), err
    assert shards.SHARD_SUFFIX in err[0] and "no space left on device" in err[0], err
    assert not [r for r in caplog.records if r.exc_info], "Beam logged the traceback"
    assert _snapshot(out) == before and not (out / "_LOCK").exists()
    assert not [p for p in out.rglob("*") if p.name.startswith(fs.TEMP_PREFIX)]


def _with_bad_lines(path, texts):
    write_jsonl(path, texts)
    with open(path, "a", encoding="utf-8") as f:
        f.write("{not json\n" + json.dumps({"body": "no text field"}) + "\n")
    return path


def _dead_letters(read_lines):
    return sorted(json.loads(line)["reason"].split(":")[0] for line in read_lines)


def test_an_output_dir_with_a_bracket_is_written_with_dead_letters_present(
    tmp_path, corpus_texts, bpe_tokenizer_dir, capsys
):
    """Beam's text sink renamed its temporary files through a glob: `OUT[6]` matched
    `OUT6`, and the first run ended in FinalizeWrite's "src and dst files do not exist"."""
    src = _with_bad_lines(tmp_path / "c.jsonl", corpus_texts[:40])
    out = tmp_path / "OUT[6]"
    for attempt in range(2):  # the first run into the folder, then one over it
        assert prepare.run(_args(src, bpe_tokenizer_dir, out, "--seed", attempt)) == 0, (
            capsys.readouterr().err
        )
        assert set(_run_ids(out).values()) and len(set(_run_ids(out).values())) == 1
        dead = sorted((out / "dead_letter").glob("*.jsonl"))
        letters = [
            line for p in dead if "removed" not in p.name for line in p.read_text().splitlines()
        ]
        assert len(letters) == 2, dead
    assert not (tmp_path / "OUT6").exists()
    assert not [p for p in out.rglob("*") if p.name.startswith(("beam-temp", fs.TEMP_PREFIX))]
