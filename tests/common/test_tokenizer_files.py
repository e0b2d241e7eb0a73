"""Word starts for whole-word masking, on tiny tokenizers of each kind we train."""

import pytest
from tokenizers import Tokenizer, models

from beam_pipelines import train_tokenizer
from common import tokenizer_files

TEXTS = ["Return a list of the values in the dictionary, unbelievably quickly.",
         "The quick brown foxes jumped over the lazy dogs repeatedly."] * 50


@pytest.mark.parametrize("model", ["unigram", "bpe", "wordpiece"])
def test_word_starts_mark_the_first_piece_of_every_word(model):
    tokenizer, trainer = train_tokenizer.build(model, 300)
    tokenizer.train_from_iterator(TEXTS, trainer)
    table = tokenizer_files.word_starts(tokenizer)
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
    assert tokenizer_files.word_starts(tokenizer) == [True, True]
    tokenizer = Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    with pytest.raises(tokenizer_files.TokenizerFilesError, match="--masking token or span"):
        tokenizer_files.word_starts(tokenizer)
