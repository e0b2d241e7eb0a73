"""trainer/startup/quiet.py's log filter: grain's note on keras-hub's 8-batch read-ahead (logged at
every epoch of a fine-tune, see `make demo`) is dropped; every other absl line still shows."""

import logging

from trainer.startup import launch

launch.prepare([])  # installs the filter, as every command does


def test_grains_read_ahead_note_is_dropped_and_other_absl_lines_kept(caplog):
    from absl import logging as absl_logging
    from grain._src.python import options  # where grain logs the note

    with caplog.at_level(logging.WARNING):
        options.ReadOptions(prefetch_buffer_size=8)  # keras-hub's choice; 16 threads default
        absl_logging.warning("a line that must be shown")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["a line that must be shown"]
