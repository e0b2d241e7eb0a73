"""Word starts for whole-word masking, on tiny tokenizers of each kind we train."""

import pytest
from tokenizers import Tokenizer, models

from beam_pipelines import tokenizer_models
from common import tokenizer_files, word_tables, word_units
from tests.support import multilingual

TEXTS = [
    "Return a list of the values in the dictionary, unbelievably quickly.",
    "The quick brown foxes jumped over the lazy dogs repeatedly.",
] * 50


@pytest.mark.parametrize("model", ["unigram", "bpe", "wordpiece"])
def test_word_starts_mark_the_first_piece_of_every_word(model):
    tokenizer, trainer = tokenizer_models.build(model, 300)
    tokenizer.train_from_iterator(TEXTS, trainer)
    table = word_tables.word_starts(tokenizer)
    assert len(table) == tokenizer.get_vocab_size()
    text = "Return unbelievably lazy dictionary values"
    encoding = tokenizer.encode(text)
    words = [encoding.word_ids[i] for i, _ in enumerate(encoding.ids)]
    for position, (token_id, word) in enumerate(zip(encoding.ids, words)):
        if word is None:  # a special token added by the post-processor
            assert table[token_id]
            continue
        first_of_word = position == 0 or words[position - 1] != word
        if model == "bpe" and word == 0:
            continue  # byte-level BPE: a text's first word has no leading-space mark
        assert table[token_id] == first_of_word, (model, encoding.tokens, position)
    if model != "wordpiece":  # too small a vocabulary for these words: cut into pieces
        assert sum(not table[i] for i in encoding.ids) > 5
    for role_id in tokenizer_files.SPECIAL_TOKENS[model].values():
        assert table[tokenizer.token_to_id(role_id)]


def test_word_level_tokens_are_words_and_an_unknown_convention_is_a_clear_error():
    tokenizer = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    assert word_tables.word_starts(tokenizer) == [True, True]
    tokenizer = Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    with pytest.raises(tokenizer_files.TokenizerFilesError, match="--masking token or span"):
        word_tables.word_starts(tokenizer)


# --- scripts written without spaces --------------------------------------------------------


def _train(model, texts, vocab_size):
    tokenizer, trainer = tokenizer_models.build(model, vocab_size)
    trainer.show_progress = False
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def _unit_lengths(tokenizer, table, texts):
    """Lengths in tokens of what whole-word masking takes together."""
    lengths = []
    for encoding in tokenizer.encode_batch(texts):
        for token_id in encoding.ids:
            if table[token_id] or not lengths:
                lengths.append(0)
            lengths[-1] += 1
    return lengths


@pytest.fixture(scope="module", params=["unigram", "bpe", "wordpiece"])
def cjk_thai(request):
    """A tokenizer of each model trained on Chinese, Japanese and Thai (and its table)."""
    texts = [d for lang in multilingual.UNSPACED for d in multilingual.documents(lang, 40)]
    tokenizer = _train(request.param, texts, 800)
    return request.param, tokenizer, word_tables.word_starts(tokenizer)


@pytest.mark.parametrize("lang", multilingual.UNSPACED)
def test_words_of_unspaced_scripts_are_a_few_tokens(cjk_thai, lang):
    model, tokenizer, table = cjk_thai
    held_out = multilingual.SENTENCES[lang]
    lengths = _unit_lengths(tokenizer, table, held_out)
    # Without the character rule a unit is a whole sentence: 10 to 40 tokens.
    assert max(lengths) <= 4, (model, lang, max(lengths))
    units = sum(len(word_units.units(s)) for s in held_out)
    assert len(lengths) >= 0.3 * units  # most tokens hold one or two characters


def _piece_text(model, token):
    """A piece's text, its mark removed; "" for a byte-level piece cut inside a character."""
    if model != "bpe":
        return token.removeprefix("\u2581").removeprefix("##")
    alphabet = word_tables._byte_level_decoding()
    try:
        return bytes(alphabet[c] for c in token.removeprefix("\u0120")).decode("utf-8")
    except UnicodeDecodeError:
        return ""


def test_a_piece_starts_a_word_where_its_text_starts_a_unit(cjk_thai):
    model, tokenizer, table = cjk_thai
    starts = marks = 0
    for token, token_id in tokenizer.get_vocab().items():
        text = _piece_text(model, token)
        marked = token.startswith(("\u2581", "\u0120")) or (
            model == "wordpiece" and not token.startswith("##")
        )
        if word_units.starts_unit(text):
            assert table[token_id], (model, token)
            starts += 1
        elif text[:1] in "\u0e31\u0e34\u0e35\u0e48\u0e49" and text and not marked:
            assert not table[token_id], (model, token)  # a Thai mark continues its consonant
            marks += 1
    assert starts > 100 and marks > 3


def test_byte_level_pieces_cut_inside_a_character():
    han, mark = "\u9f8d".encode(), "\u0e48".encode()  # a Han character; a Thai tone mark
    for head in (han[:1], han[:2], han):  # E9 ..: U+9000..U+9FFF, all Han
        assert word_tables._bytes_start_unit(head)
    assert not word_tables._bytes_start_unit(han[1:])  # begins mid-character: continues
    assert not word_tables._bytes_start_unit("\u4e2d".encode()[:1])  # E4: U+4DC0.. is no unit
    assert not word_tables._bytes_start_unit(mark)
    assert not word_tables._bytes_start_unit(mark[:2])  # a Thai consonant or a mark
    assert not word_tables._bytes_start_unit("\u00e9".encode()[:1])


@pytest.mark.parametrize("model", ["unigram", "bpe", "wordpiece"])
def test_an_english_table_is_unchanged(model):
    """Only space marks decide for spaced scripts, as before the character rule."""
    tokenizer = _train(model, TEXTS + multilingual.SENTENCES["en"] * 20, 500)
    prefix, prefixed_starts = {
        "unigram": ("\u2581", True),
        "bpe": ("\u0120", True),
        "wordpiece": ("##", False),
    }[model]
    special = set(tokenizer_files.SPECIAL_TOKENS[model].values())
    table = word_tables.word_starts(tokenizer)
    changed = [
        token
        for token, token_id in tokenizer.get_vocab().items()
        if table[token_id] != (token in special or token.startswith(prefix) == prefixed_starts)
    ]
    # Byte-level BPE's alphabet holds every byte: the lead bytes E5..E9 alone can only begin
    # a Han character (U+5000..U+9FFF), so they start words; English text never holds them.
    # Its line-break pieces (`Ċ`...) start a word too: the next line's first word has no `Ġ`.
    breaks = sorted(token for token in changed if token[0] in "\u010a\u0109\u010d\u010b\u010c")
    assert sorted(set(changed) - set(breaks)) == (
        ["å", "æ", "ç", "è", "é"] if model == "bpe" else []
    )
    assert ("\u010a" in breaks) == (model == "bpe")


def test_a_new_line_starts_a_word_with_byte_level_bpe():
    """Before: `Ċ` continued the word before it and the next line's first word continued
    `Ċ`, so the last word of a line and the first of the next were masked as one."""
    tokenizer = _train("bpe", TEXTS + multilingual.SENTENCES["en"] * 20, 500)
    table = word_tables.word_starts(tokenizer)
    ids = tokenizer.encode("the model\nthe data").ids
    tokens = [tokenizer.id_to_token(i) for i in ids]
    starts = [tokens[i] for i in range(len(ids)) if table[ids[i]]]
    assert "\u010a" in tokens and "\u010a" in starts  # the second line's "the" goes with it


# Latin words, commands and numbers glued to Chinese, Japanese and Thai without a space, as
# in technical prose (man pages, reference manuals).
GLUED = [
    "打开文件foo.txt的内容",
    "有用的FILTER-OPTION参数",
    "使用Python3.12版のAPIを呼ぶ",
    "第3章では2026年のRFC8259を読む",
    "ภาษาไทยABCภาษา",
    "设置为true时",
    "のmanページ",
]


@pytest.fixture(scope="module", params=["unigram", "bpe", "wordpiece"])
def mixed(request):
    """A tokenizer of each model trained on Chinese, Japanese, Thai and English."""
    texts = [d for lang in multilingual.UNSPACED for d in multilingual.documents(lang, 40)]
    tokenizer = _train(request.param, texts + multilingual.SENTENCES["en"] * 10 + TEXTS, 1000)
    return request.param, tokenizer, word_tables.word_starts(tokenizer)


def test_a_latin_run_glued_to_an_unspaced_script_is_a_word_of_its_own(mixed):
    """A token that begins where `word_units.units` begins a unit starts a word (unless cut
    inside a character that could be a combining mark), and a start the table of word starts
    alone does not give is at such a place; before, a run of Latin letters or digits went
    with the character before it."""
    model, tokenizer, table = mixed
    ends, mid = word_tables.unit_tables(tokenizer)
    glued = 0
    for text in GLUED:
        unit_starts = {m.start() for m in word_units._UNITS.finditer(text)}
        encoding = tokenizer.encode(text, add_special_tokens=False)
        starts = word_tables.starts_in(encoding.ids, table, ends, mid)
        for i, (begin, _) in enumerate(encoding.offsets):
            previous = encoding.offsets[i - 1][0] if i else None
            if i == 0 or encoding.tokens[i - 1] == "\u2581":
                continue  # a sequence's first token follows a special token: a start anyway
            where = (model, text, encoding.tokens, i)
            if previous == begin:  # a later byte piece of the same character
                assert not starts[i], where
            elif begin in unit_starts and not mid[encoding.ids[i]]:
                assert starts[i], where
                glued += not table[encoding.ids[i]]
            elif not table[encoding.ids[i]]:
                assert not starts[i], where
    # Starts that the table of word starts alone misses (WordPiece makes each Han character
    # a word already, and a Kana word with a character it lacks one unknown token).
    assert glued >= (0 if model == "wordpiece" else 5)
