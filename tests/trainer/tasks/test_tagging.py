"""Token classification's building blocks: word-level tagged files (CoNLL columns, JSONL), the
label set and scheme, unseen dev tags, labels on each word's first piece for the three kinds of
tokenizer, and entity-level F1 by seqeval."""

import json

import pytest

from common import tokenizer_files
from common.errors import UserError, run_cli
from trainer.tasks import entity_f1, tagging, word_alignment
from trainer.tasks.tagging import IGNORED

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
-DOCSTART- -X- -X- O
BRUSSELS\tNNP\tB-NP\tB-LOC
1996-08-22\tCD\tI-NP\tO"""


def _write(path, text: str) -> str:
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def _jsonl(path, rows) -> str:
    return _write(path, "".join(json.dumps(row) + "\n" for row in rows))


def test_conll_reads_sentences_skipping_docstart(tmp_path):
    split = tagging.read_tagged(_write(tmp_path / "train.conll", CONLL))
    assert split.words == [
        ["EU", "rejects", "German", "call", "."],
        ["Peter", "Blackburn"],
        ["BRUSSELS", "1996-08-22"],  # tabs separate columns too; the last line has no newline
    ]
    assert split.tags[0] == ["B-ORG", "O", "B-MISC", "O", "O"]
    assert split.tags[2] == ["B-LOC", "O"]
    # Each sentence's first word line; a -DOCSTART- line ends a sentence as a blank one does.
    assert split.lines == [3, 9, 12]


def test_conll_reads_the_chosen_tag_column(tmp_path):
    split = tagging.read_conll(_write(tmp_path / "train.conll", CONLL), tag_column=2)
    assert split.tags[0] == ["B-NP", "B-VP", "B-NP", "I-NP", "O"]


def test_conll_takes_crlf_and_keeps_a_word_with_a_no_break_space(tmp_path):
    text = "New\u00a0York B-LOC\r\nis O\r\n\r\n\r\nIt O\r\n"
    split = tagging.read_tagged(_write(tmp_path / "t.txt", text))
    assert split.words == [["New\u00a0York", "is"], ["It"]]


def test_jsonl_reads_string_and_numbered_tags(tmp_path):
    rows = [
        {"tokens": ["EU", "rejects", " German "], "tags": ["B-ORG", "O", "B-MISC"]},
        {"tokens": [], "tags": []},
        {"tokens": ["Peter"], "tags": ["B-PER"]},
    ]
    split = tagging.read_tagged(_jsonl(tmp_path / "t.jsonl", rows))
    assert split.words == [["EU", "rejects", "German"], ["Peter"]]
    assert split.lines == [1, 3]
    assert split.skipped_empty == 1  # a line with no tokens: skipped, counted
    names = ("O", "B-PER", "I-PER", "B-ORG")  # conll2003's ClassLabel order begins so
    numbered = [{"words": ["Peter", "Blackburn", "."], "ner_tags": [1, 2, 0]}]
    path = _jsonl(tmp_path / "n.jsonl", numbered)
    split = tagging.read_tagged(path, fields=("words", "ner_tags"), label_names=names)
    assert split.tags == [["B-PER", "I-PER", "O"]]


BAD_JSONL = [
    ({"tokens": ["a", "b", "c"], "tags": ["O", "O"]}, "line 2: 3 tokens but 2 tags"),
    ({"tokens": ["a", " "], "tags": ["O", "O"]}, "line 2: token 1 is ' '; a word cannot be"),
    ({"tokens": ["a", 7], "tags": ["O", "O"]}, "line 2: token 1 is 7"),
    ({"tokens": ["a"]}, "line 2: field 'tags' must be a list .no such field."),
    ({"tokens": "a b", "tags": ["O"]}, "line 2: field 'tokens' must be a list .a str."),
    ({"tokens": ["a"], "tags": ["PER"]}, "line 2: tag 'PER' is neither O nor"),
    ({"tokens": ["a"], "tags": [3]}, "line 2: tag 3 is a number; give the label names"),
    ({"tokens": ["a"], "tags": [True]}, "line 2: tag True is not a string or an id"),
]


@pytest.mark.parametrize(("row", "message"), BAD_JSONL)
def test_each_bad_jsonl_line_is_one_line_naming_file_and_line(tmp_path, capsys, row, message):
    path = _jsonl(tmp_path / "bad.jsonl", [{"tokens": ["x"], "tags": ["O"]}, row])
    with pytest.raises(UserError, match=f"bad.jsonl {message}") as caught:
        tagging.read_tagged(path)
    assert "\n" not in str(caught.value)
    assert run_cli(lambda: tagging.read_tagged(path), []) == 2
    assert capsys.readouterr().err.count("\n") == 1


BAD_CONLL = [
    ("a O\nb\n", -1, "line 2: 1 column.s. .'b'.; a word and its tag in column -1 need 2"),
    ("a X O\nb O\n", -1, "line 2: 2 columns, but line 1 has 3"),
    ("a X O\nb Y O\n", 3, "line 1: 3 column.s. .'a X O'.; a word and its tag in column 3 need 4"),
    ("a B-PER\nb PER\n", -1, "line 2: tag 'PER' is neither O nor"),
    ("-DOCSTART- -X- O\n\n\n", -1, "holds no sentences"),
    ("", -1, "holds no sentences"),
]


@pytest.mark.parametrize(("text", "column", "message"), BAD_CONLL)
def test_each_bad_conll_line_is_one_line_naming_file_and_line(tmp_path, text, column, message):
    path = _write(tmp_path / "bad.conll", text)
    with pytest.raises(UserError, match=f"bad.conll {message}") as caught:
        tagging.read_conll(path, column)
    assert "\n" not in str(caught.value)


def test_other_bad_inputs_are_one_line(tmp_path):
    with pytest.raises(UserError, match="column 0: that is the word's column"):
        tagging.read_conll(_write(tmp_path / "a.conll", "a O\n"), 0)
    with pytest.raises(UserError, match="a.csv: cannot tell the format"):
        tagging.read_tagged(str(tmp_path / "a.csv"))
    with pytest.raises(UserError, match="n.jsonl line 1: tag id 4 is not below the 2 label"):
        path = _jsonl(tmp_path / "n.jsonl", [{"tokens": ["a"], "tags": [4]}])
        tagging.read_tagged(path, label_names=("O", "B-X"))
    with pytest.raises(UserError, match="j.jsonl line 1 is not JSON"):
        tagging.read_tagged(_write(tmp_path / "j.jsonl", "{nope\n"))
    with pytest.raises(UserError, match="every word is tagged O"):
        tagging.label_set(tagging.read_tagged(_write(tmp_path / "o.conll", "a O\n")))


def _split(tags, path="t.conll"):
    words = [[f"w{i}" for i in range(len(t))] for t in tags]
    return tagging.TaggedSplit(path, words, tags, list(range(1, 3 * len(tags), 3)))


def test_the_label_set_is_sorted_with_o_first_and_the_scheme_detected():
    train = _split([["B-PER", "I-PER", "O"], ["B-LOC", "O", "B-ORG"]])
    tagset = tagging.label_set(train)
    assert tagset.labels == ("O", "B-LOC", "B-ORG", "B-PER", "I-PER")
    assert tagset.scheme == "IOB2"
    assert tagset.scheme_reason == "detected: every entity starts with B-"
    # IOB1 (the original CoNLL-2003 files): an entity may start with I-, B- only between two.
    iob1 = tagging.label_set(_split([["O", "O"], ["I-PER", "B-PER", "O", "I-LOC"]]))
    assert iob1.scheme == "IOB1"
    assert iob1.scheme_reason == "detected: an entity starts with I-PER at t.conll line 4"
    # After another type, an I- tag starts an entity too.
    assert tagging.detect_scheme(_split([["B-PER", "I-LOC"]]))[0] == "IOB1"
    bioes = tagging.label_set(_split([["O"], ["B-PER", "E-PER", "S-LOC"]]))
    assert bioes.scheme == "BIOES" and "t.conll line 4" in bioes.scheme_reason
    given = tagging.label_set(train, "IOB1")
    assert (given.scheme, given.scheme_reason) == ("IOB1", "given")
    with pytest.raises(UserError, match="t.conll line 4: E- or S- tags, but the scheme given"):
        tagging.label_set(_split([["O"], ["S-PER"]]), "IOB2")
    with pytest.raises(UserError, match="'BILOU' is not one of IOB1, IOB2, BIOES"):
        tagging.label_set(train, "BILOU")


def test_dev_tags_unseen_in_training_are_counted_and_reported_not_refused():
    tagset = tagging.label_set(_split([["B-PER", "I-PER", "O", "B-LOC"]]))
    dev = _split([["B-EVENT", "I-EVENT", "O"], ["B-PER", "O"], ["B-EVENT"]], "dev.conll")
    unseen = tagging.unseen_labels(dev, tagset)
    assert unseen.counts == {"B-EVENT": 2, "I-EVENT": 1}
    assert (unseen.words, unseen.sentences) == (3, 2)
    assert unseen.line().startswith("dev.conll: 3 word(s) in 2 sentence(s) carry tags the")
    assert "(B-EVENT 2, I-EVENT 1)" in unseen.line() and "\n" not in unseen.line()
    assert unseen.to_dict() == {"words": 3, "sentences": 2, "tags": {"B-EVENT": 2, "I-EVENT": 1}}
    # Their words get no label id, keep their gold tag, and are scored as the model predicts.
    assert tagging.encode_tags(dev, tagset)[0] == [IGNORED, IGNORED, 0]
    predicted = [["B-PER", "O", "O"], ["B-PER", "O"], ["O"]]
    scores = entity_f1.entity_scores(dev.tags, predicted, tagset.scheme)
    assert scores.per_type["EVENT"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 2}
    # gold: EVENT, PER, EVENT = 3; predicted: PER (wrong span: w0 of a gold EVENT), PER = 2;
    # right: 1. P = 1/2, R = 1/3, F1 = 2 PR / (P + R) = (1/3) / (5/6) = 2/5.
    assert (scores.precision, scores.recall, scores.f1) == pytest.approx((1 / 2, 1 / 3, 2 / 5))
    assert (
        tagging.unseen_labels(_split([["O", "B-LOC"]]), tagset)
        .line()
        .endswith("every tag occurs in the training split")
    )


# --- alignment ------------------------------------------------------------------------------

CORPUS = [
    "EU rejects German call to boycott British lamb .",
    "Peter Blackburn met the European Commission in Brussels on Thursday .",
    "The commission said it disagreed with German advice to consumers in Zürich .",
    "Germany's representative to the European Union's veterinary committee spoke .",
] * 20
WORDS = ["EU", "rejects", "Blackburnian", "call", "to", "boycott", "Zürich", "lamb", "."]


def _trained(model: str, prefix_space: bool = False):
    """A tiny tokenizer of `model` as train_tokenizer builds it, and its TokenizerInfo."""
    from tokenizers import pre_tokenizers

    from beam_pipelines import tokenizer_models

    tokenizer, trainer = tokenizer_models.build(model, 300, min_frequency=1)
    if prefix_space:  # RoBERTa's add_prefix_space, as a keras-hub preset may ask
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer = tokenizer_models.canonical_ids(tokenizer, model)
    tokenizer_files.add_post_processor(tokenizer, model)
    roles = tokenizer_files.SPECIAL_TOKENS[model]
    ids = {role: tokenizer.token_to_id(roles[role]) for role in tokenizer_files.ROLES}
    return tokenizer, tokenizer_files.TokenizerInfo("test", tokenizer.get_vocab_size(), ids)


KINDS = [("bpe", False), ("bpe", True), ("unigram", False), ("wordpiece", False)]


@pytest.fixture(scope="module", params=KINDS, ids=["bpe", "bpe-prefix-space", "unigram", "wp"])
def trained(request):
    return _trained(*request.param)


def test_aligned_ids_are_the_running_text_s_ids(trained):
    tokenizer, info = trained
    aligned = word_alignment.WordAligner(tokenizer, info, 128).align([WORDS])
    sentence = aligned.sentences[0]
    running = tokenizer.encode(" ".join(WORDS), add_special_tokens=False)
    assert sentence.token_ids == [info.special_token_ids["cls_token"], *running.ids] + [
        info.special_token_ids["sep_token"]
    ]
    assert aligned.counts() == {
        "sentences": 1,
        "truncated": 0,
        "words_cut": 0,
        "words_without_tokens": 0,
    }


def test_each_word_s_label_sits_on_its_first_piece(trained):
    tokenizer, info = trained
    labels = list(range(10, 10 + len(WORDS)))
    sentence = word_alignment.WordAligner(tokenizer, info, 128).align([WORDS], [labels])
    sentence = sentence.sentences[0]
    starts = sentence.word_starts
    assert [sentence.labels[s] for s in starts] == labels
    others = [label for i, label in enumerate(sentence.labels) if i not in starts]
    assert set(others) == {IGNORED}  # later pieces, [cls] and [sep]
    assert starts[0] == 1 and starts == sorted(starts)
    # The pieces from one word's start to the next are that word.
    ends = [*starts[1:], len(sentence.token_ids) - 1]
    pieces = [sentence.token_ids[s:e] for s, e in zip(starts, ends)]
    assert [tokenizer.decode(ids).strip() for ids in pieces] == WORDS
    assert any(len(p) > 1 for p in pieces)  # some word is split: the test sees sub-tokens


@pytest.mark.parametrize(("model", "marker"), [("bpe", "Ġ"), ("unigram", "▁")])
def test_words_after_the_first_carry_the_space_marker_as_in_running_text(model, marker):
    """The point of the issue: a BPE tokenizer sees ' rejects', not 'rejects'."""
    tokenizer, info = _trained(model)
    sentence = word_alignment.WordAligner(tokenizer, info, 128).align([WORDS]).sentences[0]
    firsts = [tokenizer.id_to_token(sentence.token_ids[s]) for s in sentence.word_starts]
    assert all(piece.startswith(marker) for piece in firsts[1:]), firsts
    # The first word as a text's first word: no space for our byte-level BPE, '▁' for unigram.
    assert firsts[0].startswith(marker) == (model == "unigram")


def test_pretokenized_bpe_input_would_lose_the_space():
    """Why the alignment tokenizes running text: `is_pretokenized` gives each word of a
    ByteLevel(add_prefix_space=False) BPE no space (transformers' RobertaTokenizerFast asks for
    add_prefix_space=True), so its ids are not the ids pretraining saw."""
    tokenizer, _ = _trained("bpe")
    pretokenized = tokenizer.encode(WORDS, is_pretokenized=True, add_special_tokens=False)
    running = tokenizer.encode(" ".join(WORDS), add_special_tokens=False)
    assert pretokenized.ids != running.ids
    assert not any(token.startswith("Ġ") for token in pretokenized.tokens)
    for model in ("unigram", "wordpiece"):  # these two agree either way
        tokenizer, _ = _trained(model)
        pretokenized = tokenizer.encode(WORDS, is_pretokenized=True, add_special_tokens=False)
        assert pretokenized.ids == tokenizer.encode(" ".join(WORDS), add_special_tokens=False).ids


def test_a_control_token_s_text_in_a_word_is_characters():
    tokenizer, info = _trained("bpe")
    sentence = word_alignment.WordAligner(tokenizer, info, 64).align([["a", "<s>"]]).sentences[0]
    assert sentence.token_ids.count(info.special_token_ids["cls_token"]) == 1


def test_a_long_sentence_is_cut_and_its_cut_words_counted(trained):
    tokenizer, info = trained
    full = word_alignment.WordAligner(tokenizer, info, 128).align([WORDS]).sentences[0]
    max_length = full.word_starts[4] + 1  # [cls] + pieces up to word 4's start, + [sep]
    aligner = word_alignment.WordAligner(tokenizer, info, max_length)
    aligned = aligner.align([WORDS, WORDS[:2]], [list(range(len(WORDS))), [0, 1]])
    cut = aligned.sentences[0]
    assert len(cut.token_ids) == max_length
    assert cut.word_starts == full.word_starts[:4] + [word_alignment.NO_TOKEN] * 5
    assert (aligned.truncated, aligned.words_cut) == (1, 5)
    # Cut words have no prediction: O, their gold tags stay (never a silent gain).
    predictions = list(range(max_length))
    labels = tuple(f"B-T{i}" for i in range(max_length))
    words = word_alignment.word_predictions(predictions, cut.word_starts, labels)
    assert words == [labels[s] for s in full.word_starts[:4]] + ["O"] * 5
    features = aligned.features(max_length, info.pad_id)
    assert features["labels"].shape == (2, max_length)
    assert features["padding_mask"][1].sum() == len(aligned.sentences[1].token_ids)
    assert set(features["labels"][1][len(aligned.sentences[1].token_ids) :]) == {IGNORED}


def test_a_piece_spanning_two_words_leaves_the_second_counted():
    """A tokenizer that does not split at spaces (none of ours) may give one piece to two
    words: the second then has no piece of its own, counted, never a silent shift."""
    from tokenizers import Tokenizer, models

    assert word_alignment.token_words(["ab", "cd"], [(0, 2), (2, 5)]) == [0, 1]
    vocab = {"<s>": 0, "</s>": 1, "<pad>": 2, "<unk>": 3, "<mask>": 4, "ab cd": 5, "ef": 6}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))  # no pre-tokenizer
    roles = tokenizer_files.SPECIAL_TOKENS["bpe"]
    ids = {role: vocab[roles[role]] for role in tokenizer_files.ROLES}
    info = tokenizer_files.TokenizerInfo("test", len(vocab), ids)
    aligned = word_alignment.WordAligner(tokenizer, info, 16).align([["ab", "cd"]], [[7, 8]])
    sentence = aligned.sentences[0]
    assert sentence.token_ids == [0, 5, 1]
    assert sentence.word_starts == [1, word_alignment.NO_TOKEN]
    assert sentence.labels == [IGNORED, 7, IGNORED]
    assert aligned.words_without_tokens == 1
    labels = ("O", "B-X", "I-X", "B-Y", "I-Y", "B-Z", "B-AB")
    predicted = word_alignment.word_predictions([0, 6, 0], sentence.word_starts, labels)
    assert predicted == ["B-AB", "O"]  # 'cd' has no piece to predict from: O


def test_read_align_predict_score_round_trip(tmp_path, trained):
    tokenizer, info = trained
    train = tagging.read_tagged(_write(tmp_path / "train.conll", CONLL))
    tagset = tagging.label_set(train)
    aligned = word_alignment.WordAligner(tokenizer, info, 64).align(
        train.words, tagging.encode_tags(train, tagset)
    )
    predicted = [  # a model that predicts each token's label: right at every first piece
        word_alignment.word_predictions(s.labels, s.word_starts, tagset.labels)
        for s in aligned.sentences
    ]
    assert predicted == train.tags
    assert entity_f1.entity_scores(train.tags, predicted, tagset.scheme).f1 == 1.0


# --- entity F1 ------------------------------------------------------------------------------

IOB2_GOLD = [
    ["B-PER", "I-PER", "O", "B-LOC", "O"],  # PER 0-1, LOC 3
    ["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"],  # ORG 0-2, PER 4
    ["O", "B-MISC", "I-MISC"],  # MISC 1-2
]
IOB2_PREDICTED = [
    ["B-PER", "I-PER", "O", "B-ORG", "B-LOC"],  # PER 0-1 right; ORG 3 (wrong type), LOC 4 wrong
    ["B-ORG", "I-ORG", "O", "O", "B-PER"],  # ORG 0-1 (short), PER 4 right
    ["O", "I-MISC", "I-MISC"],  # conlleval: I- after O starts MISC 1-2: right
]


def test_entity_f1_in_iob2_equals_the_hand_count_and_seqeval():
    # Gold entities: PER 2, LOC 1, ORG 1, MISC 1 = 5. Predicted: PER 2, ORG 2, LOC 1, MISC 1
    # = 6. Right (type and span): PER 2, MISC 1 = 3.
    # Micro: P = 3/6 = 1/2, R = 3/5, F1 = 2 P R / (P + R) = (3/5) / (11/10) = 6/11.
    # PER: P = 2/2, R = 2/2, F1 = 1. MISC: 1/1, 1/1, 1. LOC: 0/1, 0/1, 0. ORG: 0/2, 0/1, 0.
    scores = entity_f1.entity_scores(IOB2_GOLD, IOB2_PREDICTED, "IOB2")
    assert (scores.precision, scores.recall, scores.f1) == pytest.approx((1 / 2, 3 / 5, 6 / 11))
    assert (scores.support, scores.mode) == (5, "conlleval")
    assert scores.per_type == {
        "LOC": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
        "MISC": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1},
        "ORG": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
        "PER": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 2},
    }
    from seqeval import metrics

    assert scores.f1 == pytest.approx(metrics.f1_score(IOB2_GOLD, IOB2_PREDICTED))
    assert scores.precision == pytest.approx(metrics.precision_score(IOB2_GOLD, IOB2_PREDICTED))
    assert scores.recall == pytest.approx(metrics.recall_score(IOB2_GOLD, IOB2_PREDICTED))
    # IOB1 is scored the same way (seqeval's default mode reads both).
    assert entity_f1.entity_scores(IOB2_GOLD, IOB2_PREDICTED, "IOB1").f1 == scores.f1
    assert json.loads(json.dumps(scores.to_dict()))["f1"] == pytest.approx(6 / 11)


BIOES_GOLD = [
    ["B-PER", "E-PER", "O", "S-LOC"],  # PER 0-1, LOC 3
    ["S-ORG", "O", "B-MISC", "I-MISC", "E-MISC"],  # ORG 0, MISC 2-4
]
BIOES_PREDICTED = [
    ["B-PER", "E-PER", "O", "S-LOC"],  # PER right, LOC right
    ["S-ORG", "O", "B-MISC", "I-MISC", "I-MISC"],  # ORG right; MISC never ends: no entity
]


def test_entity_f1_in_bioes_is_strict_and_equals_the_hand_count_and_seqeval():
    # Gold: PER, LOC, ORG, MISC = 4. Predicted (strict: B- I-* E- or S-): PER, LOC, ORG = 3;
    # all 3 right. P = 3/3 = 1, R = 3/4, F1 = 2 * 1 * 3/4 / (7/4) = 6/7. MISC: 0, 0, 0.
    scores = entity_f1.entity_scores(BIOES_GOLD, BIOES_PREDICTED, "BIOES")
    assert (scores.precision, scores.recall, scores.f1) == pytest.approx((1.0, 3 / 4, 6 / 7))
    assert (scores.support, scores.mode) == (4, "strict")
    assert scores.per_type["MISC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert scores.per_type["PER"]["f1"] == 1.0
    from seqeval import metrics
    from seqeval.scheme import IOBES

    strict = {"mode": "strict", "scheme": IOBES}
    assert scores.f1 == pytest.approx(metrics.f1_score(BIOES_GOLD, BIOES_PREDICTED, **strict))
    # conlleval's lenient reading would count the unended MISC 2-4 as found: F1 1.
    assert metrics.f1_score(BIOES_GOLD, BIOES_PREDICTED) == 1.0


def test_entity_f1_with_no_entity_anywhere_is_zero_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = entity_f1.entity_scores([["O", "O"]], [["O", "O"]], "IOB2")
    assert (scores.f1, scores.support, scores.per_type) == (0.0, 0, {})
    with pytest.raises(ValueError, match="differ in sentences or words"):
        entity_f1.entity_scores([["O", "O"]], [["O"]], "IOB2")
    with pytest.raises(ValueError, match="'BILOU' is not one of"):
        entity_f1.seqeval_arguments("BILOU")


@pytest.mark.slow
def test_a_file_on_gcs_reads_as_a_local_one(gcs):
    gcs.write_object("ner/train.conll", CONLL.encode())
    gcs.apply_env()
    assert len(tagging.read_tagged(gcs.url("ner", "train.conll"))) == 3
