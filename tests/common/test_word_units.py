"""common/word_units.py: one definition of a word unit for every script."""

import pytest

from common import word_units


@pytest.mark.parametrize(
    "text",
    [
        "A plain English sentence, with punctuation: (and brackets).",
        "Ein deutscher Satz über Größe und Maß.",
        "Русский текст для проверки.",
        "한국어는 띄어쓰기를 합니다.",  # Hangul is written with spaces
        "  tabs\tand\nnewlines\x0b and \u2028 separators  ",
    ],
)
def test_spaced_scripts_are_split_exactly_like_str_split(text):
    assert not word_units.has_unspaced(text)
    assert word_units.units(text) == text.split()


def test_han_and_kana_are_one_unit_per_character_and_punctuation_stands_alone():
    assert word_units.units("我们使用数据。") == ["我", "们", "使", "用", "数", "据", "。"]
    assert word_units.units("日本語のテキスト、です") == [
        "日",
        "本",
        "語",
        "の",
        "テ",
        "キ",
        "ス",
        "ト",
        "、",
        "で",
        "す",
    ]
    assert word_units.units("人々") == ["人", "々"]  # the iteration mark is a unit too
    assert word_units.units("ｶﾀｶﾅ") == ["ｶ", "ﾀ", "ｶ", "ﾅ"]  # half-width Katakana


def test_mixed_script_keeps_spaced_words_whole():
    assert word_units.units("Python 3.12版のAPIを使う") == [
        "Python",
        "3.12",
        "版",
        "の",
        "API",
        "を",
        "使",
        "う",
    ]
    assert word_units.units("全角\u3000スペース") == ["全", "角", "ス", "ペ", "ー", "ス"]


def test_combining_marks_stay_with_their_consonant():
    # Thai: ที = tho thahan + sara ii (a combining vowel); ่ is a tone mark.
    assert word_units.units("ที่นี่") == ["ที่", "นี่"]
    assert word_units.units("ភាសា") == ["ភា", "សា"]  # Khmer vowel sign aa


def test_spaced_words_and_unit_starts():
    assert word_units.is_spaced_word("English") and word_units.is_spaced_word("3.12")
    assert not word_units.is_spaced_word("語") and not word_units.is_spaced_word("ที่")
    assert word_units.starts_unit("語学") and word_units.starts_unit("ที")
    assert not word_units.starts_unit("ี")  # a combining vowel continues a cluster
    assert not word_units.starts_unit("ing") and not word_units.starts_unit("")
