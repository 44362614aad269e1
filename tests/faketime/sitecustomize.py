"""Loaded (through PYTHONPATH) into the pgsched processes the tests run with their wall
clock shifted by libfaketime (``tests.helpers.clock_off``).

libfaketime 0.9.10 (Debian 12), with the monotonic clock left true
(FAKETIME_DONT_FAKE_MONOTONIC), breaks every ``clock_nanosleep(CLOCK_MONOTONIC,
TIMER_ABSTIME)``: it passes the kernel a negative time (wolfcw/libfaketime#426), and
Python 3.11's ``time.sleep`` uses exactly that call, so it raises ``OSError: [Errno 22]``.
Faking the monotonic clock too is worse: timed waits on locks and events then never end.
So here ``time.sleep`` waits in ``select()``, which libfaketime passes through untouched.
Nothing of pgsched's own changes: this is the test tool's bug, not a host's condition.
"""

import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)  # retried with the time left after a signal (PEP 475)


time.sleep = _sleep
