"""Tokenize documents with the fast tokenizer and chunk them, one bundle at a time."""

from __future__ import annotations

import concurrent.futures
import itertools
from collections import Counter

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindows

from beam_pipelines import chunking, progress, text_pieces
from beam_pipelines.accounting import STATS, emit_stat, emit_stats, source_key, split_key
from beam_pipelines.documents import Document, split_of
from common import tokenizer_files

TAIL = "tail"
BLOCK_ROWS = 4096  # rows per emitted block: big enough to amortise per-element costs
# What a pending text is: a whole document, or a piece of a long one (the last one or not).
WHOLE, PIECE, LAST_PIECE = 0, 1, 2


class TokenizeAndChunk(beam.DoFn):
    """Document -> blocks of full rows (main), leftover tail per split (TAIL), counts (STATS);
    each document goes to the split it carries (chosen by `cleaning.CountBySplit`).

    The tokenizer is loaded once per worker in setup(); documents are tokenized in batches
    of ~`batch_chars` characters with `encode_batch_fast` (Rust, multi-threaded). The Rust
    call runs in a helper thread (it releases the GIL) while this thread reads the next
    batch and chunks the previous one, so the Python work overlaps the tokenizer's.

    A document over `piece_chars` characters is tokenized in pieces cut at whitespace
    (`text_pieces`): the same ids, special tokens put around them once, and the tokenizer's
    working memory bounded by the batch, not by the longest document.
    """

    def __init__(
        self,
        tokenizer_dir,
        max_length,
        batch_chars=1_000_000,
        progress_dir=None,
        piece_chars=text_pieces.PIECE_CHARS,
    ):
        self.tokenizer_dir = tokenizer_dir
        self.progress_dir = progress_dir
        self.max_length = max_length
        self.batch_chars = batch_chars
        self.piece_chars = piece_chars

    def setup(self):
        tokenizer, _ = tokenizer_files.load(self.tokenizer_dir)
        # A literal `[CLS]` or `<s>` in a document is text, not a control id (a new document).
        self.tokenizer = tokenizer_files.text_only(tokenizer)
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.special_only = self.tokenizer.num_special_tokens_to_add(False)
        self.cutter = text_pieces.Cutter.of(self.tokenizer)
        self.ids_dtype = chunking.ids_dtype(self.tokenizer.get_vocab_size())
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.tally = progress.Tally(self.progress_dir)

    def teardown(self):
        self.executor.shutdown(wait=False)

    def start_bundle(self):
        # ((split, source name or None), text, WHOLE/PIECE/LAST_PIECE)
        self.pending: list[tuple[tuple, str, int]] = []
        self.pending_chars = 0
        self.in_flight = None  # ([((split, origin), kind)], future of encodings)
        self.open_document = False  # a long document's prefix went out, its suffix not yet
        self.chunkers: dict[str, chunking.Chunker] = {}
        self.stats: Counter = Counter()

    def process(self, doc: Document):
        split = split_of(doc)
        if not doc.text.strip():
            self.stats[split_key(split, "documents_empty")] += 1
            return
        # With --sources its tokens are also counted under its source, named beside its split.
        where = (split, doc.origin)
        pieces = self.cutter.pieces(doc.text, self.piece_chars) if self.cutter else None
        if pieces is None:
            yield from self._add(where, doc.text, WHOLE)
            return
        piece = next(pieces)
        for following in pieces:
            yield from self._add(where, piece, PIECE)
            piece = following
        yield from self._add(where, piece, LAST_PIECE)

    def _add(self, where, text, kind):
        self.pending.append((where, text, kind))
        self.pending_chars += len(text)
        if self.pending_chars >= self.batch_chars:
            yield from self._flush(min_rows=BLOCK_ROWS)

    def _submit_pending(self):
        """Starts tokenizing the pending batch; returns the batch that was in flight."""
        previous, self.in_flight = self.in_flight, None
        if self.pending:
            kinds = [(where, kind) for where, _, kind in self.pending]
            texts = [text for _, text, _ in self.pending]
            self.in_flight = (
                kinds,
                self.executor.submit(
                    self.tokenizer.encode_batch_fast, texts, add_special_tokens=True
                ),
            )
        self.pending, self.pending_chars = [], 0
        return previous

    def _chunk(self, batch):
        kinds, future = batch
        kept: dict[str, list] = {}
        documents: Counter = Counter()
        for ((split, origin), kind), encoding in zip(kinds, future.result()):
            ids = encoding.ids
            if kind != WHOLE:
                ids = self._piece_ids(ids, kind == LAST_PIECE)
            elif len(ids) <= self.special_only:
                ids = None
            if ids is None:  # e.g. only control characters
                self.stats[split_key(split, "documents_empty")] += 1
                continue
            kept.setdefault(split, []).append(ids)
            documents[split] += kind != PIECE
            if origin is not None:
                self.stats[source_key(origin, "tokens")] += len(ids)
        for split, id_lists in kept.items():  # one numpy conversion per split and batch
            flat = np.fromiter(
                itertools.chain.from_iterable(id_lists),
                dtype=self.ids_dtype,
                count=sum(map(len, id_lists)),
            )
            self.stats[split_key(split, "documents_tokenized")] += documents[split]
            self.stats[split_key(split, "tokens_in")] += len(flat)
            self.tally.add(documents=documents[split], tokens=len(flat))
            self.chunkers.setdefault(split, chunking.Chunker(self.max_length, self.ids_dtype)).add(
                flat
            )

    def _piece_ids(self, ids, last: bool) -> list | None:
        """A piece's ids without the special tokens the tokenizer put around it; the whole
        document's prefix goes before its first token, its suffix after its last piece.
        None for the last piece of a document with no token (counted as empty)."""
        prefix, suffix = self.cutter.prefix, self.cutter.suffix
        body = ids[len(prefix) : len(ids) - len(suffix)]
        if body and not self.open_document:
            body, self.open_document = [*prefix, *body], True
        if last:
            if not self.open_document:
                return None
            body, self.open_document = [*body, *suffix], False
        return body

    def _flush(self, min_rows: int, drain: bool = False):
        previous = self._submit_pending()
        if previous:
            self._chunk(previous)
        if drain and self.in_flight:
            self._chunk(self._submit_pending())
        for split, chunker in self.chunkers.items():
            if chunker.size >= min_rows * self.max_length:
                rows = chunker.full_rows()
                yield (split, rows, chunking.full_lengths(rows))

    def finish_bundle(self):
        for block in self._flush(min_rows=1, drain=True):
            yield GlobalWindows.windowed_value(block)
        for split, chunker in self.chunkers.items():
            rest = chunker.remainder()
            if len(rest):
                yield beam.pvalue.TaggedOutput(TAIL, GlobalWindows.windowed_value((split, rest)))
        yield from emit_stats(self.stats)
        self.tally.flush()


class ChunkTails(beam.DoFn):
    """(split, [tails]) -> the split's last rows, plus the exact count of dropped tokens."""

    def __init__(self, max_length, pad_tail, pad_id):
        self.max_length, self.pad_tail, self.pad_id = max_length, pad_tail, pad_id

    def process(self, element):
        split, tails = element
        rows, lengths, dropped = chunking.chunk_tails(
            list(tails), self.max_length, self.pad_tail, self.pad_id
        )
        if len(rows):
            yield (split, rows, lengths)
        padded = int(len(rows) * self.max_length - lengths.sum())
        yield emit_stat(split_key(split, "tokens_dropped"), dropped)
        yield emit_stat(split_key(split, "tokens_padded"), padded)


class ToSequences(beam.PTransform):
    """Documents -> `(blocks, stats)`: blocks `(split, ids, lengths)` of rows of exactly
    `max_length` tokens (every token once, tails of all bundles chunked together), and
    `(name, count)` pairs for the manifest's accounting.

    `blocks` is a pair of PCollections, the full rows and the tails' rows, left for the
    shuffle to join: a local runner holds a Flatten's output in memory, while the consumers
    of its inputs run fused with the steps that make them (`local.shuffle.ShuffleOnDisk`).

    Args:
        tokenizer_dir: the tokenizer folder (local or gs://).
        max_length: tokens per row.
        pad_tail: pad each split's last partial row instead of dropping it.
        pad_id: the id padding uses.
        batch_chars: characters handed to the fast tokenizer at once.
        progress_dir: where the progress tallies go (local runs), or None.
        piece_chars: documents longer than this are tokenized in pieces.

    Example:
        >>> blocks, stats = docs | ToSequences("gs://b/tokenizer", 128, pad_tail=False, pad_id=1)
    """

    def __init__(
        self,
        tokenizer_dir,
        max_length,
        pad_tail,
        pad_id,
        batch_chars=1_000_000,
        progress_dir=None,
        piece_chars=text_pieces.PIECE_CHARS,
    ):
        super().__init__()
        self.tokenize = TokenizeAndChunk(
            tokenizer_dir, max_length, batch_chars, progress_dir, piece_chars
        )
        self.chunk_tails = ChunkTails(max_length, pad_tail, pad_id)

    def expand(self, docs):
        tokenized = docs | "TokenizeAndChunk" >> beam.ParDo(self.tokenize).with_outputs(
            TAIL, STATS, main="blocks"
        )
        tails = (
            tokenized[TAIL]
            | "GroupTails" >> beam.GroupByKey()
            | "ChunkTails" >> beam.ParDo(self.chunk_tails).with_outputs(STATS, main="blocks")
        )
        stats = (tokenized[STATS], tails[STATS]) | "SequenceStats" >> beam.Flatten()
        return (tokenized.blocks, tails.blocks), stats
