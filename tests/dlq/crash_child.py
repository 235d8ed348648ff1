"""Child process of the crash tests: parks records, printing each acknowledged offset, until killed.

``python -m tests.dlq.crash_child ROOT MODE`` with MODE:

- ``loop``: park forever;
- ``before-fsync``: park 5 records, then block the 6th after its write, before its fsync;
- ``half-write``: park 5 records, then write only half of the 6th and block.

"WAIT" is printed when blocked; the parent then kills the process with SIGKILL.
"""

from __future__ import annotations

import itertools
import os
import sys
import time

from framework.dlq import DeadLetterWAL, segment
from tests.dlq.support import rec


def _block(*_: object) -> None:
    print("WAIT", flush=True)
    time.sleep(3600)


def main(root: str, mode: str) -> None:
    wal = DeadLetterWAL(root, max_segment_bytes=4096)
    for i in itertools.count():
        if i == 5 and mode == "before-fsync":
            segment._datasync = _block
        elif i == 5 and mode == "half-write":
            segment._write_all = lambda fd, data: (os.write(fd, data[: len(data) // 2]), _block())
        wal.park_sync(rec(i, value=b"\x00\xff" * (i % 7)))
        print(i, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
