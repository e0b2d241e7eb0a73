"""The temporary names of staged writes, shared by the writer (`fs.py`) and the error
reporter (`errors.py`, which names a failed staged write by its target); `errors` cannot
import `fs`, which imports it.

A local atomic write goes through `{TEMP_PREFIX}{uuid}-{name}` in the same folder (a leading
"." keeps it out of every split and shard glob); a kill can leave one behind.
"""

import re

TEMP_PREFIX = ".tmp-"
STAGED = re.compile(re.escape(TEMP_PREFIX) + r"[0-9a-f]{32}-")  # a staged name's prefix
