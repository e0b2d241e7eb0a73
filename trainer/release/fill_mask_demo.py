"""Fill-mask on held-out sentences: the expected word beside the model's top 3.

    python -m trainer.fill_mask_demo --model RUN_DIR --corpus corpus.jsonl \\
        --validation_fraction 0.02 [--num 10] [--seed 0]

Sentences come from documents of the JSONL corpus that the prepare pipeline hashes into the
validation split with the same `--validation_fraction` (so the model never trained on them).
In each, one word that is a single token of the vocabulary is replaced by the mask token
(a word split into pieces cannot be one blank). Prints the expected word, the top 3 and
whether the word is among them, then how many blanks the model got at top 1 and top 3.
"""

from __future__ import annotations

import json
import random
import re

from common import flags
from common.errors import UserError, run_cli
from common.splits import hash_split
from trainer.release.predict import MaskPredictor
from trainer.startup import keras_backend

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def held_out_sentences(corpus: str, validation_fraction: float, max_sentences: int = 2000):
    """Plain prose sentences (6-30 words, mostly letters) of the validation documents."""
    found = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line).get("text", "")
            if hash_split(text, validation_fraction, 0.0) != "validation":
                continue
            for sentence in _SENTENCE_END.split(" ".join(text.split())):
                words = sentence.split()
                letters = sum(c.isalpha() or c == " " for c in sentence)
                if 6 <= len(words) <= 30 and letters >= 0.9 * len(sentence):
                    found.append(sentence)
            if len(found) >= max_sentences:
                break
    return found


def mask_one_word(predictor: MaskPredictor, sentence: str, rng: random.Random):
    """(masked text, expected word), masking a random single-token word of 3+ letters (not
    the first word); None when the sentence has none."""
    encoding = predictor.tokenizer.encode(sentence, add_special_tokens=False)
    spans = []
    for start, end in encoding.offsets:
        while start < end and sentence[start].isspace():
            start += 1  # a word-start marker's span may include the space before the word
        spans.append((start, end))
    candidates = []
    for i, (start, end) in enumerate(spans):
        word = sentence[start:end]
        starts_word = start > 0 and sentence[start - 1] == " "
        ends_word = end == len(sentence) or not sentence[end].isalnum()
        next_is_new = (
            i + 1 == len(spans) or spans[i + 1][0] > end or not sentence[end : end + 1].isalnum()
        )
        if starts_word and ends_word and next_is_new and word.isalpha() and len(word) >= 3:
            candidates.append((start, end))
    if not candidates:
        return None
    start, end = rng.choice(candidates)
    return sentence[:start] + predictor.mask_token + sentence[end:], sentence[start:end]


def run(model: str, corpus: str, validation_fraction: float, num: int, seed: int) -> str:
    predictor = MaskPredictor(model)
    rng = random.Random(seed)
    sentences = held_out_sentences(corpus, validation_fraction)
    rng.shuffle(sentences)
    blanks = []
    for sentence in sentences:
        picked = mask_one_word(predictor, sentence, rng)
        if picked and len(predictor.tokenizer.encode(picked[0]).ids) <= predictor.max_length:
            blanks.append(picked)
        if len(blanks) == num:
            break
    if not blanks:
        raise UserError(
            f"no held-out sentence found in {corpus} (validation fraction {validation_fraction})"
        )
    results = predictor.predict([text for text, _ in blanks], top_k=3)
    lines, top1, top3 = [], 0, 0
    for (text, expected), masks in zip(blanks, results):
        answers = [token.strip() for token, _ in masks[0]]
        top1 += answers[0].lower() == expected.lower()
        hit = expected.lower() in (a.lower() for a in answers)
        top3 += hit
        shown = ", ".join(f"{token.strip()!r} {p:.2f}" for token, p in masks[0])
        lines.append(f"{'+' if hit else ' '} {text}\n    expected {expected!r:<14} top 3: {shown}")
    lines.append(
        f"held-out blanks filled: {top1} of {len(blanks)} at top 1, {top3} of "
        f"{len(blanks)} in the top 3"
    )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="training run, export or checkpoint")
    parser.add_argument("--corpus", required=True, help="the JSONL corpus given to prepare")
    parser.add_argument(
        "--validation_fraction", type=float, required=True, help="the same value prepare used"
    )
    parser.add_argument("--num", type=int, default=10, help="blanks to fill")
    parser.add_argument("--seed", type=int, default=0, help="which sentences and words")
    args = parser.parse_args(argv)

    def body():
        keras_backend.check()
        print(run(args.model, args.corpus, args.validation_fraction, args.num, args.seed))

    return run_cli(body, argv)
