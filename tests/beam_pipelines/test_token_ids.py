"""A tokenizer whose ids reach the vocabulary size (gaps in its ids) is refused on the
launcher, in one line, before anything is written."""

import glob
import json

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from beam_pipelines import prepare
from common import schema, tfrecord, tokenizer_files


def _gapped_tokenizer(folder, top_id, added_specials=False):
    special = tokenizer_files.SPECIAL_TOKENS["wordpiece"]
    words = sorted(
        {w for line in ["the cat sat on the mat", "a dog ran far"] for w in line.split()}
    )
    vocab = {tok: i for i, tok in enumerate(dict.fromkeys(special.values()))}
    vocab.update({w: len(vocab) + i for i, w in enumerate(words)})
    if top_id is not None:
        vocab[words[-1]] = top_id  # a gap: the vocabulary holds fewer tokens than this id
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    if added_specials:  # as train_tokenizer registers them: matched in text unless told not to
        tokenizer.add_special_tokens(list(dict.fromkeys(special.values())))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer_files.save(tokenizer, str(folder), special, 512)
    return str(folder), words[-1]


@pytest.mark.parametrize("top_id", [70_000, 1_000])
def test_ids_at_or_over_the_vocabulary_size_are_refused_on_the_launcher(tmp_path, capsys, top_id):
    tok_dir, word = _gapped_tokenizer(tmp_path / "tok", top_id)
    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(json.dumps({"text": f"the {word} and the cat {i}"}) + "\n" for i in range(50))
    )
    out = tmp_path / "out"
    code = prepare.run(
        [
            "--runner=FnApiRunner",
            "--input",
            str(data),
            "--tokenizer",
            tok_dir,
            "--output_dir",
            str(out),
            "--max_length",
            "16",
            "--quality_filter",
            "none",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"has id {top_id}, but the vocabulary holds" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_literal_control_token_in_a_document_is_text_not_a_control_id(tmp_path):
    """Audit 4, finding 3: a document quoting `[CLS]` (HTML's `<s>` for a BPE tokenizer) must
    not carry the id that opens a document in ModernBERT's packed rows."""
    tok_dir, _ = _gapped_tokenizer(tmp_path / "tok", None, added_specials=True)
    _, info = tokenizer_files.load(tok_dir)
    cls_id = info.special_token_ids["cls_token"]
    data = tmp_path / "in.jsonl"
    docs = 40
    rows = (json.dumps({"text": f"the cat [CLS] sat on the mat {i}"}) for i in range(docs))
    data.write_text("".join(row + "\n" for row in rows))
    out = tmp_path / "out"
    args = ["--runner=FnApiRunner", "--input", str(data), "--tokenizer", tok_dir]
    args += ["--output_dir", str(out), "--max_length", "16", "--quality_filter", "none"]
    args += ["--validation_fraction", "0"]
    assert prepare.run(args) == 0
    ids = []
    for path in glob.glob(str(out / "train" / "*.tfrecord*")):
        with open(path, "rb") as f:
            ids.append(schema.decode_examples(list(tfrecord.records(f)), 16)[0])
    assert int(np.sum(np.concatenate(ids) == cls_id)) == docs  # one per document, at its start
