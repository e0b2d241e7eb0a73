"""Short examples packed several to a row, for the families that read them apart
(`Family.packed_states`: ModernBERT's document masks), instead of one padded row each.

Embedding, reranking and tagging data is mostly short: a batch of 32 queries of 12 tokens
padded to the 16-token bucket is a quarter padding, and a batch of documents whose longest
has 200 tokens but most 40 is mostly padding in its 256 bucket. Packed, the batch's examples
fill rows of `max_length` tokens, longest first, each in the first row with room (first-fit
decreasing); the row count is rounded up on a fixed ladder (1, 2, 3, 4, 6, 8, 12, ...: two
steps an octave, under a third of the rows filler), times the device count so that each device
gets whole rows. One row length: a batch's shape follows its total tokens, which vary little
from batch to batch, not its longest text, which varies a lot, so a run compiles a handful of
programs (padded buckets compile one per pair of query and document buckets). The model reads each
example's tokens apart (`example_ids`: its index in the batch, -1 on padding; `positions`:
from 0 in each example) and pools each (`pooling.pool_examples`, from `example_starts`), so
the batch's vectors come out in the examples' order, as padded rows give them.

Example:
    >>> layout = Packed(pad_id=1, length=16, multiple=1)
    >>> batch = layout.features([[0, 7, 2], [0, 8, 9, 2]])
    >>> batch["token_ids"].shape, batch["example_starts"].tolist()
    ((1, 16), [4, 0])
"""

from __future__ import annotations

import dataclasses

import numpy as np

from common.errors import UserError
from trainer.release import embeddings

EXAMPLE_PADDING = -1  # the example id of a padding token (ModernBERT's padding segment)


def applies(family, packing: str) -> bool:
    """Whether a run packs its rows (`--packing` auto, on, off): `on` is refused in one line
    where the family reads one example a row."""
    if packing == "on" and family.packed_states is None:
        raise UserError(
            f"--packing on: a {family.name} model reads one text a row (packed rows need "
            "document masks: modernbert); use --packing auto or off"
        )
    return packing != "off" and family.packed_states is not None


def row_ladder(count: int, multiple: int = 1) -> int:
    """The row count of a batch that needs `count` rows: the next of 1, 2, 3, 4, 6, 8, 12, ...
    at or above it, rounded up to a multiple of `multiple`."""
    step = 1
    while True:
        for rows in (step, step + step // 2):
            if rows >= count:
                return _round_up(rows, multiple)
        step *= 2


def _round_up(count: int, multiple: int) -> int:
    return -(-count // multiple) * multiple


def rows_per_step(rows: int, examples: int, batch_size: int, multiple: int = 1) -> int:
    """The packed rows a training step takes: as many as hold `batch_size` of the split's
    `examples` on average (at least one), a multiple of the devices."""
    return _round_up(-(-rows * batch_size // examples), multiple)


def first_fit(lengths: list[int], length: int) -> list[tuple[int, int]]:
    """(row, start) of each example, longest first into the first row with room."""
    free, placed = [], [None] * len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        row = next((r for r, room in enumerate(free) if room >= lengths[i]), len(free))
        if row == len(free):
            free.append(length)
        placed[i] = (row, length - free[row])
        free[row] -= lengths[i]
    return placed


@dataclasses.dataclass(frozen=True)
class Packed:
    """Rows of `length` tokens, several examples each."""

    pad_id: int
    length: int  # tokens a row: the longest example's (--max_length)
    multiple: int = 1  # the devices that share a batch: each gets whole rows

    def features(self, rows: list, chunk: int | None = None) -> dict:
        """The batch's inputs; with `chunk`, each `chunk` examples packed apart (example ids
        and starts counted inside their chunk) into the same number of rows, so that the
        arrays split into equal chunks along their first axis (gradient caching's)."""
        length = self.length
        pieces = [
            rows[i : i + (chunk or len(rows))] for i in range(0, len(rows), chunk or len(rows))
        ]
        placed = [first_fit([len(row) for row in piece], length) for piece in pieces]
        needed = max(1 + max(row for row, _ in spots) for spots in placed)
        count = row_ladder(needed, self.multiple)
        parts = [self._rows(piece, spots, count, length) for piece, spots in zip(pieces, placed)]
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

    def _rows(self, rows: list, placed: list, count: int, length: int) -> dict:
        token_ids = np.full((count, length), self.pad_id, np.int32)
        example_ids = np.full((count, length), EXAMPLE_PADDING, np.int32)
        positions = np.zeros((count, length), np.int32)
        starts = np.zeros(len(rows), np.int32)
        for i, (row, start) in enumerate(placed):
            end = start + len(rows[i])
            token_ids[row, start:end] = rows[i]
            example_ids[row, start:end] = i
            positions[row, start:end] = np.arange(len(rows[i]))
            starts[i] = row * length + start
        return {
            "token_ids": token_ids,
            "padding_mask": (example_ids != EXAMPLE_PADDING).astype(np.int32),
            "example_ids": example_ids,
            "positions": positions,
            "example_starts": starts,
        }


def _bucket(rows: list, sizes: tuple[int, ...]) -> int:
    return next(size for size in sizes if size >= max(len(row) for row in rows))


@dataclasses.dataclass(frozen=True)
class Padded:
    """One example a row, right-padded to the bucket of the batch's longest."""

    pad_id: int
    sizes: tuple[int, ...]
    with_segments: bool = False

    def features(self, rows: list, chunk: int | None = None) -> dict:
        """The batch's inputs (`chunk`: any; rows split into chunks as they are)."""
        return embeddings.features(rows, self.pad_id, self.with_segments, _bucket(rows, self.sizes))


def pack_split(
    features: dict, labels: np.ndarray, pad_id: int, ignored, multiple: int = 1, length=None
):
    """A whole split of token-level examples (a tagger's: `features` token_ids and
    padding_mask, `labels` [examples, length, ...] per piece, right-padded one a row) packed
    once, first-fit decreasing, into as few rows of `length` (default theirs) as hold them (a
    multiple of `multiple`): (features with `example_ids` and `positions`, labels `ignored` on
    padding). Packed once: an epoch shuffles the rows, and the examples of a row never see
    each other."""
    length = length or features["token_ids"].shape[1]
    sizes = features["padding_mask"].sum(axis=1)
    rows = [features["token_ids"][i, :size].tolist() for i, size in enumerate(sizes)]
    packed = Packed(pad_id, length).features(rows)
    starts = packed.pop("example_starts")
    last_row = int(starts.max()) // length  # first-fit fills rows 0, 1, ... in order
    packed = {name: array[: _round_up(last_row + 1, multiple)] for name, array in packed.items()}
    out = np.full((*packed["token_ids"].shape, *labels.shape[2:]), ignored, labels.dtype)
    flat = out.reshape(-1, *labels.shape[2:])
    for i, (start, size) in enumerate(zip(starts, sizes)):
        flat[start : start + size] = labels[i, :size]
    return packed, out


def one_per_row(features: dict) -> dict:
    """Padded rows (one example each) as the packed models read rows: the example 0 on its
    tokens, positions from 0."""
    mask = features["padding_mask"].astype(bool)
    count, length = mask.shape
    return {
        **features,
        "example_ids": np.where(mask, 0, EXAMPLE_PADDING).astype(np.int32),
        "positions": np.broadcast_to(np.arange(length, dtype=np.int32), (count, length)).copy(),
    }


def pack_example_targets(features: dict, targets: np.ndarray, pad_id: int, length: int):
    """Examples with one target each (a reranker's pairs and labels) packed as `pack_split`
    packs them, into rows of `length`: (features, [rows, length, 2] = (the target, its weight)
    on each example's first token, 0 elsewhere), the layout `fit` slices by rows and
    `packed_models.PackedClassifier` predicts in."""
    placed = np.zeros((*features["token_ids"].shape, 2), np.float32)
    placed[:, 0] = np.stack([targets, np.ones_like(targets)], axis=-1)
    return pack_split(features, placed, pad_id, 0.0, length=length)
