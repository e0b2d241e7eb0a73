import errno
import gzip
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer
from transformers import AutoTokenizer

from beam_pipelines import tokenizer_models, train_tokenizer
from common import tokenizer_files, word_tables
from tests.support import multilingual


def _train(tmp_path, **kwargs):
    out = tmp_path / "tok"
    config = train_tokenizer.TokenizerConfig(output_dir=str(out), **{"vocab_size": 400, **kwargs})
    info = train_tokenizer.train(config)
    return str(out), info


def _check_loads_everywhere(tok_dir, model):
    special = tokenizer_files.SPECIAL_TOKENS[model]
    raw = Tokenizer.from_file(f"{tok_dir}/tokenizer.json")
    auto = AutoTokenizer.from_pretrained(tok_dir)
    for role, token in special.items():
        assert getattr(auto, role) == token
        assert getattr(auto, role + "_id") == raw.token_to_id(token)
    text = f"The function returns a {auto.mask_token} value."
    ids = auto(text)["input_ids"]
    assert ids[0] == auto.cls_token_id and ids[-1] == auto.sep_token_id
    assert auto.mask_token_id in ids
    assert raw.encode(text).ids == ids  # both libraries agree
    # The mask eats the space before it, as a masked word's first piece did in training:
    # no bare word-start piece ('▁', 'Ġ') is left in front of it.
    tokens = raw.encode(text).tokens
    assert tokens[ids.index(auto.mask_token_id) - 1] not in ("\u2581", "\u0120"), tokens
    decoded = auto.decode(ids, skip_special_tokens=True)
    assert "function returns" in decoded
    _, info = tokenizer_files.load(tok_dir)
    assert info.mask_id == auto.mask_token_id and info.pad_id == auto.pad_token_id
    return raw


def test_from_txt_unigram(tmp_path, corpus_texts):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(t.replace("\n", " ") for t in corpus_texts), encoding="utf-8")
    tok_dir, info = _train(tmp_path, input=str(path))
    assert info["documents_read"] == len(corpus_texts)
    _check_loads_everywhere(tok_dir, "unigram")
    config = json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"  # loads in transformers 4.x


def test_from_gzipped_jsonl_multiline_documents_keep_vocab_clean(tmp_path, corpus_texts):
    path = tmp_path / "corpus.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for text in corpus_texts:
            f.write(json.dumps({"text": text}) + "\n")
    assert sum("\n" in t for t in corpus_texts) > 100  # the documents do span lines
    tok_dir, _ = _train(tmp_path, input=str(path))
    raw = _check_loads_everywhere(tok_dir, "unigram")
    assert not [t for t in raw.get_vocab() if "\n" in t]


def test_from_parquet_bpe(tmp_path, corpus_texts):
    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"body": corpus_texts}), path, row_group_size=100)
    tok_dir, info = _train(tmp_path, input=str(path), text_field="body", model="bpe")
    assert info["documents_read"] == len(corpus_texts)
    _check_loads_everywhere(tok_dir, "bpe")


def test_from_saved_datasets_dataset_wordpiece(tmp_path, corpus_texts):
    import datasets

    saved = tmp_path / "hf"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict({"text": corpus_texts})}
    ).save_to_disk(str(saved))
    tok_dir, info = _train(tmp_path, hf_dataset=str(saved), hf_splits="train", model="wordpiece")
    assert info["documents_read"] == len(corpus_texts)
    _check_loads_everywhere(tok_dir, "wordpiece")


def test_max_documents_samples(tmp_path, corpus_texts):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus_texts))
    _, info = _train(tmp_path, input=str(path), max_documents=50, max_read_documents=0)
    assert info["documents_read"] == len(corpus_texts) and info["documents_used"] == 50


def test_reading_stops_at_the_budget_from_files_in_random_order(tmp_path, corpus_texts):
    paths = []
    for i in range(8):
        path = tmp_path / f"part-{i}.jsonl"
        path.write_text(
            "".join(
                json.dumps({"text": f"file {i}: {t}"}) + "\n"
                for t in corpus_texts[i * 40 : (i + 1) * 40]
            )
        )
        paths.append(str(path))
    config = train_tokenizer.TokenizerConfig(
        output_dir=str(tmp_path / "tok"), input=",".join(paths), max_documents=20
    )
    assert train_tokenizer.read_budget(config) == 200  # 10x the sample by default
    texts = [r.text for r in train_tokenizer.read_corpus(config)]
    assert texts[0].split(":")[0] != "file 0" or texts[40].split(":")[0] != "file 1"
    info = train_tokenizer.train(config)
    assert info["documents_read"] == 200 and info["documents_used"] == 20


def test_reservoir_sample_is_uniform():
    counts = [0] * 10
    for seed in range(2000):
        for x in train_tokenizer.reservoir_sample(range(10), 3, seed):
            counts[x] += 1
    assert all(500 < c < 700 for c in counts), counts  # expected 600 each


def test_bad_input_is_reported_by_file_and_line(tmp_path, corpus_texts, capsys):
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus_texts[:300]))
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(
        b'{"text": "fine"}\n{"body": "no text field"}\n{"text": "caf\xe9 latin-1"}\n{not json\n'
    )
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 this is not parquet")
    tok_dir, info = _train(tmp_path, input=f"{good},{bad},{broken}")
    err = capsys.readouterr().err
    assert f"{bad}:2: missing field 'text'" in err
    assert f"{bad}:3: invalid UTF-8 at byte" in err
    assert f"{bad}:4: malformed JSON" in err
    assert f"{broken}:0: unreadable" in err
    assert info["documents_rejected"] == 4
    assert (tmp_path / "tok" / "dead_letter.jsonl").read_text().count("\n") == 4


def test_cli_errors_are_one_line(tmp_path, capsys):
    code = train_tokenizer.main(
        ["--input", str(tmp_path / "missing*.txt"), "--output_dir", str(tmp_path / "o")]
    )
    assert code == 2
    assert capsys.readouterr().err.strip().startswith("error: --input")


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--seed", "-1", "--seed must be at least 0"),
        ("--vocab_size", "3", "--vocab_size must be at least 6"),
        ("--min_frequency", "0", "--min_frequency must be at least 1"),
        ("--max_read_documents", "-5", "--max_read_documents must be at least 0"),
    ],
)
def test_bad_flags_are_one_line_and_write_nothing(
    tmp_path, corpus_jsonl, capsys, flag, value, message
):
    out = tmp_path / "tok"
    code = train_tokenizer.main(
        ["--input", str(corpus_jsonl), "--output_dir", str(out), flag, value]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: {message} (got {value})"] and not out.exists()


# --- scripts written without spaces (Chinese, Japanese, Thai) -------------------------------


def _unspaced_corpus(tmp_path, count=30):
    path = tmp_path / "unspaced.jsonl"
    docs = [
        d for lang in multilingual.UNSPACED + ("en",) for d in multilingual.documents(lang, count)
    ]
    path.write_text(
        "".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8"
    )
    return str(path)


@pytest.mark.parametrize("model", tokenizer_models.MODELS)
def test_unspaced_scripts_get_short_whole_words_and_few_unknowns(tmp_path, model):
    """Each recipe on a small zh/ja/th/en corpus: every character of the held-out text is in
    the vocabulary and the units whole-word masking takes are a few tokens long."""
    tok_dir, _ = _train(tmp_path, input=_unspaced_corpus(tmp_path), model=model, vocab_size=1000)
    tokenizer, info = tokenizer_files.load(tok_dir)
    table = word_tables.word_starts(tokenizer)
    for lang in multilingual.UNSPACED:
        held_out = multilingual.documents(lang, 5, seed=1)
        for encoding in tokenizer.encode_batch(held_out):
            assert info.special_token_ids["unk_token"] not in encoding.ids, (model, lang)
            starts = [i for i, token_id in enumerate(encoding.ids) if table[token_id]]
            longest = max(b - a for a, b in zip(starts, starts[1:]))
            assert longest <= 4, (model, lang, encoding.tokens)


def test_wordpiece_makes_only_an_unseen_han_character_unknown(tmp_path):
    """BERT's rule: a Han character is a word of its own, so a character missing from the
    vocabulary costs one unknown token, not the whole clause around it."""
    tok_dir, _ = _train(
        tmp_path, input=_unspaced_corpus(tmp_path), model="wordpiece", vocab_size=1000
    )
    tokenizer = Tokenizer.from_file(f"{tok_dir}/tokenizer.json")
    text = "我们先训练一个龘分词器"  # 龘 is in no training text
    tokens = tokenizer.encode(text, add_special_tokens=False).tokens
    assert tokens.count("[UNK]") == 1 and "".join(tokens).replace("[UNK]", "龘") == text


@pytest.mark.parametrize("model", ["unigram", "wordpiece"])
def test_an_alphabet_larger_than_the_vocabulary_keeps_its_frequent_characters(tmp_path, model):
    """Unigram stopped ("not large enough to contain all chars") and WordPiece outgrew
    --vocab_size when a corpus has more characters than the vocabulary: the rarest ones
    are left out (the unknown token) and the vocabulary keeps its size."""
    tok_dir, info = _train(tmp_path, input=_unspaced_corpus(tmp_path), model=model, vocab_size=300)
    assert info["vocab_size"] <= 300 and info["characters_left_out"] > 100
    tokenizer, _ = tokenizer_files.load(tok_dir)
    assert "的" in "".join(tokenizer.get_vocab())  # the most frequent characters are kept


def test_a_streamed_corpus_with_too_many_characters_is_one_line(tmp_path, capsys):
    code = train_tokenizer.main(
        [
            "--input",
            _unspaced_corpus(tmp_path),
            "--output_dir",
            str(tmp_path / "tok"),
            "--vocab_size",
            "300",
            "--max_documents",
            "0",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "--vocab_size 300 cannot hold every character" in err
    assert "Traceback" not in err


def _tree(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_full_disk_while_saving_keeps_the_previous_tokenizer_whole(
    tmp_path, corpus_texts, capsys, monkeypatch
):
    """The card is written after tokenizer.json: a full disk there used to leave a new
    tokenizer.json beside the old card and info. One line, the old folder as it was."""
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus_texts[:300]))
    out = tmp_path / "tok"
    args = [
        "--input",
        str(path),
        "--output_dir",
        str(out),
        "--vocab_size",
        "400",
        "--progress_seconds",
        "0",
    ]
    assert train_tokenizer.main(args) == 0
    before = _tree(out)

    def full_disk(card, folder):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.path.join(folder, "README.md"))

    monkeypatch.setattr(train_tokenizer.tokenizer_card, "write", full_disk)
    capsys.readouterr()
    assert train_tokenizer.main(args + ["--model", "bpe"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: cannot write {out / 'README.md'}: no space left on device; the "
        "previous output (if any) is kept, nothing half-written is left"
    ]
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "tok"]


# WordPiece is left out: two merges of equal count at the vocabulary's cut can still swap a
# piece (seen once in CI on this corpus); canonical_ids fixes the ids' order, not that.
@pytest.mark.parametrize("model", ["unigram", "bpe"])
def test_the_same_corpus_gives_the_same_tokenizer_in_every_process(tmp_path, corpus_jsonl, model):
    """`tokenizers` breaks ties by its hash maps' per-process seeds: two processes must still
    write the same tokenizer.json (`canonical_ids`)."""
    import subprocess
    import sys

    written = []
    for run in ("a", "b"):
        out = tmp_path / run
        args = ["--input", str(corpus_jsonl), "--output_dir", str(out), "--model", model]
        proc = subprocess.run(
            [sys.executable, "-m", "beam_pipelines.train_tokenizer", *args, "--vocab_size", "600"],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        written.append((out / "tokenizer.json").read_bytes())
    assert written[0] == written[1]
    _check_loads_everywhere(str(tmp_path / "a"), model)


def test_canonical_ids_keep_the_specials_and_the_segmentation(tmp_path, corpus_texts):
    for model in ("unigram", "wordpiece"):
        tokenizer, trainer = tokenizer_models.build(model, 500)
        trainer.show_progress = False
        tokenizer.train_from_iterator(corpus_texts[:300], trainer=trainer)
        canonical = tokenizer_models.canonical_ids(tokenizer, model)
        for token in tokenizer_files.SPECIAL_TOKENS[model].values():
            assert canonical.token_to_id(token) == tokenizer.token_to_id(token)
        for text in corpus_texts[300:340]:
            assert canonical.encode(text).tokens == tokenizer.encode(text).tokens
        assert sorted(canonical.get_vocab()) == sorted(tokenizer.get_vocab())
