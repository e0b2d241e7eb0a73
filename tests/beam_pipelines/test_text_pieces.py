"""Long documents tokenized in pieces give the token stream of the whole document
(beam_pipelines/text_pieces.py), for every recipe of tokenizer_models, and the pipeline's
rows and counts do not change."""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from tokenizers import Tokenizer, normalizers, pre_tokenizers

from beam_pipelines import text_pieces, tokenization, tokenizer_models
from beam_pipelines.documents import Document
from common import tokenizer_files

# Every whitespace character, runs of them, separators (U+001C, which Python calls space and
# Rust does not), a character NFKC turns into a space and a mark, a combining mark, Han
# without spaces, the mask token (it eats the space before it), digits and punctuation.
_GLUE = [
    " ",
    "  ",
    "\n",
    "\n\n  ",
    "\t",
    " \t\n",
    "\r\n",
    "\u3000",
    "\x85",
    "\u00a0",
    "\u2028",
    "\u2029",
    "\u1680",
    "\u2003",
    "\u202f",
    "\u205f",
    "\x0b",
    "\x0c",
    " \x1c ",
    "\x1c",
    "\x1f ",
    " \u00b4",
    "\u00b4 ",
    "e\u0301 ",
    " <mask> ",
    "<mask> ",
    " \u4e2d\u6587\u5b57\u7b26\u4e32",
    "\u3002 ",
    " 123,456.7 ",
    " (x)",
    "",
]


@pytest.fixture(scope="module", params=tokenizer_models.MODELS)
def tokenizer(request, corpus_texts):
    tokenizer, trainer = tokenizer_models.build(request.param, 700)
    trainer.show_progress = False
    tokenizer.train_from_iterator(corpus_texts[:300], trainer=trainer)
    tokenizer_files.add_post_processor(tokenizer, request.param)
    return tokenizer


def _long_document(corpus_texts, size=40_000) -> str:
    parts, n, i = [], 0, 0
    while n < size:
        part = corpus_texts[i % len(corpus_texts)] + _GLUE[i % len(_GLUE)]
        parts.append(part)
        n, i = n + len(part), i + 1
    return "".join(parts)


def test_a_long_document_in_pieces_tokenizes_as_the_whole(tokenizer, corpus_texts):
    text = _long_document(corpus_texts)
    cutter = text_pieces.Cutter.of(tokenizer)
    assert cutter is not None and cutter.cut_at == text_pieces._ANY
    for size in (25, 300, 4096):
        pieces = list(cutter.pieces(text, size))
        assert "".join(pieces) == text and len(pieces) > len(text) // (2 * size)
        ids = [i for piece in pieces for i in tokenizer.encode(piece, add_special_tokens=False).ids]
        whole = tokenizer.encode(text, add_special_tokens=True).ids
        assert [*cutter.prefix, *ids, *cutter.suffix] == whole


def test_pieces_end_before_whitespace_and_text_without_any_is_not_cut():
    cutter = text_pieces.Cutter(text_pieces._ANY, (0,), (2,))
    pieces = list(cutter.pieces("aaa bbb  ccc\u3000ddd\x1ceee fff", 5))
    assert pieces == ["aaa", " bbb", "  ccc", "\u3000ddd\x1ceee", " fff"]
    assert list(cutter.pieces("\u4e2d" * 20 + " end", 5)) == ["\u4e2d" * 20, " end"]
    assert cutter.pieces("short", 5) is None
    spaces = text_pieces.Cutter(text_pieces._SPACE, (), ())
    assert list(spaces.pieces("aa\nbb cc\tdd ee", 4)) == ["aa\nbb", " cc\tdd", " ee"]


def test_tokenizers_that_could_join_across_a_cut_are_not_cut(tokenizer):
    assert text_pieces.Cutter.of(tokenizer) is not None
    changed = Tokenizer.from_str(tokenizer.to_str())
    changed.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Strip()])
    assert text_pieces.Cutter.of(changed) is None
    changed = Tokenizer.from_str(tokenizer.to_str())
    changed.pre_tokenizer = pre_tokenizers.Split("ab", "isolated")
    assert text_pieces.Cutter.of(changed) is None
    changed = Tokenizer.from_str(tokenizer.to_str())
    changed.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    changed.normalizer = normalizers.NFKC()  # whitespace not folded: cut at spaces only
    assert text_pieces.Cutter.of(changed).cut_at == text_pieces._SPACE


_GOT: dict = {}  # what the pipeline's steps hand out, by name (the runner is in-process)


def _collect(element, name):
    _GOT.setdefault(name, []).append(element)


def _sequences(docs, tokenizer_dir, piece_chars):
    _GOT.clear()
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        blocks, counts = (
            p
            | beam.Create(docs)
            | tokenization.ToSequences(
                tokenizer_dir,
                64,
                pad_tail=True,
                pad_id=1,
                batch_chars=30_000,
                piece_chars=piece_chars,
            )
        )
        for i, part in enumerate(blocks):
            _ = part | f"Rows{i}" >> beam.Map(_collect, "rows")
        _ = counts | beam.Map(_collect, "stats")
    rows, stats = _GOT.get("rows", []), _GOT.get("stats", [])
    # Blocks are cut wherever a flush falls; the rows themselves must be the same.
    ids = sorted(tuple(row) for _, block, _ in rows for row in block.tolist())
    totals = {}
    for key, n in stats:
        totals[key] = totals.get(key, 0) + n
    return ids, totals


def test_the_pipeline_writes_the_same_rows_and_counts_with_pieces(corpus_texts, bpe_tokenizer_dir):
    text = _long_document(corpus_texts, 60_000)
    docs = [
        Document("a.jsonl", i, t, split="train")
        for i, t in enumerate(
            [corpus_texts[0], text, corpus_texts[1], " \u3000", text[:20_000], corpus_texts[2]]
        )
    ]
    whole_ids, whole_stats = _sequences(docs, bpe_tokenizer_dir, 1 << 30)
    piece_ids, piece_stats = _sequences(docs, bpe_tokenizer_dir, 500)
    assert piece_stats == whole_stats and whole_stats["train/documents_tokenized"] == 5
    assert piece_ids == whole_ids and len(whole_ids) > 100
    # As the pipeline reads text: a literal `<s>` in a docstring is characters, not a control id.
    tokenizer = tokenizer_files.text_only(tokenizer_files.load(bpe_tokenizer_dir)[0])
    assert whole_stats["train/tokens_in"] == sum(
        len(e.ids) for e in tokenizer.encode_batch([d.text for d in docs if d.text.strip()])
    )


class _Recording:
    """The tokenizer, recording the longest text it was handed."""

    def __init__(self, tokenizer):
        self.tokenizer, self.longest = tokenizer, 0

    def encode_batch_fast(self, texts, add_special_tokens):
        self.longest = max([self.longest, *map(len, texts)])
        return self.tokenizer.encode_batch_fast(texts, add_special_tokens=add_special_tokens)


def test_the_tokenizer_is_never_handed_a_whole_long_document(corpus_texts, bpe_tokenizer_dir):
    """Its working memory grows with the text it is handed (~150 bytes per byte)."""
    text = _long_document(corpus_texts, 200_000)
    step = tokenization.TokenizeAndChunk(
        bpe_tokenizer_dir, 64, batch_chars=50_000, piece_chars=4096
    )
    step.setup()
    step.tokenizer = recording = _Recording(step.tokenizer)
    step.start_bundle()
    out = [*step.process(Document("a.jsonl", 1, text, split="train")), *step.finish_bundle()]
    assert out and 0 < recording.longest <= 4096
    assert step.stats["train/documents_tokenized"] == 1
    assert step.stats["train/tokens_in"] == len(step.tokenizer.tokenizer.encode(text).ids)
