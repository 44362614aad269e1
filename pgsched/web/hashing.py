"""Password hashing on a small bounded executor of its own.

An argon2id hash (argon2-cffi's defaults) holds 64 MiB and takes about a quarter second of
CPU. Run in Starlette's thread pool (40 threads), 40 parallel sign-ins once took a web
process to 2.5 GB and a viewer's page to 16 s. Here at most ``threads`` hashes run at once
(``threads`` × 64 MiB) and at most ``queue`` more wait; an attempt beyond that raises
:class:`HashingBusy` at once (the sign-in answers 503 with ``Retry-After``) instead of
waiting in an unbounded line. The hashing threads run at a lower CPU priority
(:data:`NICE`), so that the hashes let through do not slow the other requests either.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

RETRY_AFTER = 1  # seconds a refused sign-in is told to wait: a hash takes about 0.25 s


NICE = 10  # added to a hashing thread's nice value: argon2 yields the CPU to requests


def _yield_the_cpu() -> None:
    """Lower the calling thread's CPU priority by NICE (Linux's setpriority on a thread id
    applies to that thread alone; libargon2's lane threads, made by it, inherit it), so that
    hashes do not take the CPU from the event loop and the other requests' threads: a
    sign-in waits a little longer, a viewer's page does not. Raising one's own nice value
    needs no privilege; where it fails, hashing runs at normal priority."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
    except (AttributeError, OSError):
        pass


class HashingBusy(Exception):
    """Every hashing thread is busy and the queue is full; try again in ``retry_after``
    seconds."""

    def __init__(self, retry_after: int = RETRY_AFTER):
        super().__init__(f"password hashing is busy; retry in {retry_after} s")
        self.retry_after = retry_after


class PasswordHashing:
    """Runs hash and verify calls on ``threads`` threads (1-64), with at most ``queue``
    (0-1024) more waiting. :meth:`run` blocks the calling thread until its call is done.
    Threads start when first needed; :meth:`close` stops them."""

    def __init__(self, threads: int = 2, queue: int = 8):
        self.threads, self.queue = threads, queue
        self._executor = ThreadPoolExecutor(
            threads, thread_name_prefix="pgsched-hash", initializer=_yield_the_cpu
        )
        self._lock = threading.Lock()
        self._in = 0  # calls submitted and not done

    def full(self) -> bool:
        """Whether a call now would raise HashingBusy (a glance: another thread may take or
        free a place just after)."""
        return self._in >= self.threads + self.queue

    def run(self, call: Callable[..., T], *args: object) -> T:
        """``call(*args)`` on a hashing thread; its result, or what it raised. Raises
        HashingBusy, without running it, when ``threads + queue`` calls are in already."""
        with self._lock:
            if self._in >= self.threads + self.queue:
                raise HashingBusy()
            self._in += 1
        try:
            future = self._executor.submit(call, *args)
        except BaseException:
            self._done()
            raise
        future.add_done_callback(lambda _: self._done())
        return future.result()

    def _done(self) -> None:
        with self._lock:
            self._in -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
