"""Top-k predictions for the mask tokens of texts, from a keras-hub preset or a training run.

    python -m trainer.predict --model runs/tiny "The capital of France is <mask>." --top_k 5

The mask token is the tokenizer's own (`<mask>` for byte-level BPE, `[MASK]` for
WordPiece/Unigram). Texts without one, or longer than the model's positions, are refused
(exit code 2, one line) before the model is loaded.

Example:
    >>> predict_masks("exports/tiny/keras-hub", ["Paris is the <mask> of France."], top_k=2)
    [[[(' capital', 0.61), (' city', 0.12)]]]
"""

from __future__ import annotations

import functools

import numpy as np

from common import flags, tokenizer_files
from common.errors import UserError, run_cli
from trainer.models import model_source
from trainer.run_folder import run_dir
from trainer.startup import keras_backend

BATCH_SIZE = 32


class InputError(UserError):
    """A text the model cannot take; the message is one line for the user."""


class MaskPredictor:
    """Loads a model once and fills the masks of many texts.

    Args:
        model_dir: a run folder, a checkpoint file or a keras-hub preset
            (`trainer.models.model_source`), with its tokenizer.

    Example:
        >>> predictor = MaskPredictor("runs/tiny")
        >>> predictor.mask_token
        '<mask>'
        >>> predictor.predict(["a <mask> b <mask>"], top_k=1)   # one list per mask
        [[[(' x', 0.3)], [(' y', 0.2)]]]
    """

    def __init__(self, model_dir: str):
        self.source = model_source.resolve(model_dir)
        if self.source.tokenizer_dir is None:
            raise model_source.ModelNotFoundError(
                f"{model_dir} has no {run_dir.TOKENIZER_DIR}/ folder: cannot tokenize text."
            )
        self.tokenizer, self.info = tokenizer_files.load(self.source.tokenizer_dir)
        # Over-long texts must be refused, not cut (the cut could drop the mask).
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.max_length = self.source.max_sequence_length
        self._masked_lm = None  # loaded on first use, so that input errors come fast

    @property
    def mask_token(self) -> str:
        return self.tokenizer.id_to_token(self.info.mask_id)

    @property
    def masked_lm(self):
        if self._masked_lm is None:
            from trainer.startup import quiet

            masked_lm = model_source.load_source(self.source)
            # One call at load: oneDNN logs its once-per-process int64 `E` line at the first.
            inputs, _ = self.model_inputs([[self.info.mask_id]])
            with quiet.harmless_lines_hidden():
                masked_lm(inputs, training=False)
            self._masked_lm = masked_lm
        return self._masked_lm

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Token ids with the special tokens; raises InputError for texts the model can't take."""
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        for number, (text, row) in enumerate(zip(texts, ids), start=1):
            if self.info.mask_id not in row:
                raise InputError(f"text {number} has no {self.mask_token} token: {text!r}")
            if len(row) > self.max_length:
                raise InputError(
                    f"text {number} is {len(row)} tokens long; the model takes at "
                    f"most {self.max_length} (special tokens included)"
                )
        return ids

    def predict(self, texts: list[str], top_k: int = 5) -> list[list[list[tuple[str, float]]]]:
        """For each text, for each mask (left to right): the top_k (token, probability)."""
        if top_k < 1:
            raise InputError(f"top_k must be at least 1, not {top_k}")
        ids = self.encode(texts)
        results = []
        for start in range(0, len(ids), BATCH_SIZE):
            results += self._predict_batch(ids[start : start + BATCH_SIZE], top_k)
        return results

    def _predict_batch(self, ids: list[list[int]], top_k: int):
        inputs, mask_counts = self.model_inputs(ids)
        logits = np.asarray(self.masked_lm(inputs, training=False), dtype=np.float64)
        probs = token_probabilities(logits, self.info.vocab_size)
        top = np.argsort(-probs, axis=-1)[..., : min(top_k, self.info.vocab_size)]
        return [
            [
                [(self._token_text(int(t)), float(probs[i, m, t])) for t in top[i, m]]
                for m in range(count)
            ]
            for i, count in enumerate(mask_counts)
        ]

    def _token_text(self, token_id: int) -> str:
        """The token as text; pieces that decode to nothing (a lone word-start marker such
        as "▁") are shown as the raw token so the listing never shows an empty string."""
        text = self.tokenizer.decode([token_id], skip_special_tokens=False)
        return text if text else self.tokenizer.id_to_token(token_id)

    def model_inputs(self, ids: list[list[int]]):
        """keras-hub inputs for a batch, right-padded; returns (inputs, masks per row).

        Right padding keeps position ids equal to the training ones (and to HF RoBERTa's).
        `mask_positions` has a fixed width per batch; rows with fewer masks repeat 0.
        """
        length = max(map(len, ids))
        token_ids = np.full((len(ids), length), self.info.pad_id, np.int32)
        padding_mask = np.zeros((len(ids), length), np.int32)
        positions = [[p for p, t in enumerate(row) if t == self.info.mask_id] for row in ids]
        mask_positions = np.zeros((len(ids), max(map(len, positions))), np.int32)
        for i, row in enumerate(ids):
            token_ids[i, : len(row)] = row
            padding_mask[i, : len(row)] = 1
            mask_positions[i, : len(positions[i])] = positions[i]
        inputs = self.source.family.inputs(token_ids, padding_mask, mask_positions, np.zeros_like)
        return inputs, [len(p) for p in positions]


def token_probabilities(logits: np.ndarray, vocab_size: int) -> np.ndarray:
    """The softmax over the tokenizer's `vocab_size` ids of masked-LM logits. An embedding
    padded past the vocabulary (a family with `spare_embeddings`: ModernBERT pads to a
    multiple of 64) has rows no text can hold: they get no probability, not a share."""
    logits = np.asarray(logits, np.float64).copy()
    logits[..., vocab_size:] = -np.inf
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    return probs / probs.sum(-1, keepdims=True)


@functools.lru_cache(maxsize=4)
def _predictor(model_dir: str) -> MaskPredictor:
    return MaskPredictor(model_dir)


def predict_masks(model_dir: str, texts: list[str], top_k: int = 5):
    """`[text][mask][rank] -> (token, probability)`; the model stays loaded between calls."""
    return _predictor(model_dir).predict(texts, top_k)


def format_results(texts, results) -> str:
    lines = []
    for number, (text, masks) in enumerate(zip(texts, results), start=1):
        lines.append(f"[{number}] {text}")
        for m, candidates in enumerate(masks, start=1):
            lines.append(f"  mask {m}:")
            lines += [f"    {score:.4f}  {token!r}" for token, score in candidates]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = flags.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model",
        required=True,
        help="keras-hub preset, training output dir or .weights.h5 checkpoint",
    )
    parser.add_argument("texts", nargs="+", help="texts with the tokenizer's mask token")
    parser.add_argument("--top_k", type=int, default=5)
    args = parser.parse_args(argv)

    def body():
        keras_backend.check()
        results = MaskPredictor(args.model).predict(args.texts, args.top_k)
        print(format_results(args.texts, results))

    return run_cli(body, argv)
