"""The demo's held-out fill-mask: sentences only from validation documents, one whole word
masked, the expected word recoverable from the masked text."""

import json
import random
import types

from tokenizers import Tokenizer

from common.splits import hash_split
from trainer.release import fill_mask_demo


def test_sentences_come_from_validation_documents_only(corpus_jsonl):
    texts = [json.loads(line)["text"] for line in open(corpus_jsonl, encoding="utf-8")]
    held_out = " ".join(
        " ".join(t.split()) for t in texts if hash_split(t, 0.2, 0.0) == "validation"
    )
    sentences = fill_mask_demo.held_out_sentences(str(corpus_jsonl), 0.2)
    assert sentences and all(s in held_out for s in sentences)


def test_one_single_token_word_is_masked(corpus_jsonl, bpe_tokenizer_dir):
    tokenizer = Tokenizer.from_file(bpe_tokenizer_dir + "/tokenizer.json")
    predictor = types.SimpleNamespace(tokenizer=tokenizer, mask_token="<mask>")
    rng = random.Random(0)
    picked = [
        fill_mask_demo.mask_one_word(predictor, s, rng)
        for s in fill_mask_demo.held_out_sentences(str(corpus_jsonl), 0.2)[:50]
    ]
    picked = [p for p in picked if p]
    assert len(picked) >= 25
    for masked, word in picked:
        assert masked.count("<mask>") == 1 and word.isalpha() and len(word) >= 3
        before, after = masked.split("<mask>")
        assert before.endswith(" ") and not after[:1].isalnum()
        assert len(tokenizer.encode(" " + word, add_special_tokens=False).ids) == 1
