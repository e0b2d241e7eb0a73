import numpy as np

from beam_pipelines import chunking


def test_chunker_cuts_exact_rows_in_order():
    chunker = chunking.Chunker(4)
    for start, stop in [(0, 3), (3, 4), (4, 11)]:
        chunker.add(np.arange(start, stop, dtype=np.int32))
    rows = chunker.full_rows()
    np.testing.assert_array_equal(rows, np.arange(8).reshape(2, 4))
    np.testing.assert_array_equal(chunker.remainder(), [8, 9, 10])
    assert chunker.size == 0


def test_tails_drop_less_than_one_row_or_pad():
    tails = [np.array([1, 2, 3]), np.array([4, 5]), np.array([6, 7, 8])]
    rows, lengths, dropped = chunking.chunk_tails(tails, 4, pad_tail=False, pad_id=0)
    assert rows.shape == (2, 4) and dropped == 0
    rows, lengths, dropped = chunking.chunk_tails(tails + [np.array([9])], 4, False, 0)
    assert rows.shape == (2, 4) and dropped == 1
    rows, lengths, dropped = chunking.chunk_tails(tails + [np.array([9])], 4, True, -1)
    assert dropped == 0 and rows.shape == (3, 4)
    assert lengths.tolist() == [4, 4, 1] and rows[2].tolist()[1:] == [-1, -1, -1]
    assert sorted(rows[rows >= 0].tolist()) == list(range(1, 10))
