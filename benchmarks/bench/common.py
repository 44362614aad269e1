"""Helpers shared by every measurement script of ``benchmarks/run.py``.

Runs under two interpreters: the one that has pgsched installed and the peers' own venv
(``benchmarks/.venv-peers``), so it needs only the standard library (psutil and psycopg
are imported where used).

A measurement script prints one JSON object per result on stdout::

    {"system": "pgsched", "part": "drain", "config": "concurrency 16", "metrics": {...}}

and anything else on stderr. It exits non-zero when the measurement failed (a crash, a
queue not drained, a job lost): run.py then stops and prints nothing it did not measure.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit, urlunsplit


class BenchFailed(Exception):
    """A measurement did not complete correctly; the script exits 1 with this message."""


def emit(system: str, part: str, config: str, **metrics: Any) -> None:
    """Print one result line (the protocol run.py reads)."""
    print(
        json.dumps({"system": system, "part": part, "config": config, "metrics": metrics}),
        flush=True,
    )


def log(*args: Any) -> None:
    print(*args, file=sys.stderr, flush=True)


# --- DSNs -------------------------------------------------------------------------------


def uri_with_db(uri: str, dbname: str) -> str:
    """``uri`` (a postgresql:// URI) pointing at database ``dbname``."""
    parts = urlsplit(uri)
    return urlunsplit(
        (parts.scheme, parts.netloc, "/" + quote(dbname), parts.query, parts.fragment)
    )


def to_uri(dsn: str) -> str:
    """A postgresql:// URI for ``dsn`` (URI or key=value; asyncpg only takes URIs).
    Unix-socket hosts go into the query string (``?host=/path``)."""
    if "://" in dsn:
        return dsn
    from psycopg.conninfo import conninfo_to_dict

    info = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    user = quote(info.pop("user", ""), safe="")
    password = info.pop("password", None)
    host = info.pop("host", "")
    port = info.pop("port", None)
    dbname = info.pop("dbname", "postgres")
    netloc = user + (":" + quote(password, safe="") if password else "") + ("@" if user else "")
    query: dict[str, str] = {}
    if host and not host.startswith("/"):
        netloc += host + (f":{port}" if port else "")
    else:
        if host:
            query["host"] = host
        if port:
            query["port"] = port
    query.update(info)
    return urlunsplit(("postgresql", netloc, "/" + quote(dbname), urlencode(query), ""))


# --- statistics -------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile, p in 0..100."""
    if not values:
        raise BenchFailed("no values to take a percentile of")
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100.0 * len(s) + 0.5) - 1))
    return s[k]


def latency_summary(lat_ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(lat_ms, 50), 3),
        "p90_ms": round(percentile(lat_ms, 90), 3),
        "p95_ms": round(percentile(lat_ms, 95), 3),
        "p99_ms": round(percentile(lat_ms, 99), 3),
        "max_ms": round(max(lat_ms), 3),
        "mean_ms": round(statistics.fmean(lat_ms), 3),
    }


def tenths(times: list[float]) -> dict[str, float]:
    """From the completion instants (seconds, any epoch) of a drain: the rate over the whole
    span, over its first tenth and over its last tenth of jobs, and last ÷ first."""
    t = sorted(times)
    n = len(t)
    k = n // 10
    if k < 2:
        raise BenchFailed(f"too few completions ({n}) to compare tenths")
    first = (k - 1) / max(t[k - 1] - t[0], 1e-9)
    last = (k - 1) / max(t[-1] - t[n - k], 1e-9)
    return {
        "jobs_per_s": round((n - 1) / max(t[-1] - t[0], 1e-9), 1),
        "first_tenth_jobs_per_s": round(first, 1),
        "last_tenth_jobs_per_s": round(last, 1),
        "last_over_first": round(last / first, 3),
    }


# --- memory -----------------------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU seconds used so far by the processes ``pids`` and their
    descendants (those still alive: a process that has exited is not counted)."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
    return total


def server_pid(conn: Any) -> int:
    """The PostgreSQL postmaster's pid: the parent of this connection's backend."""
    import psutil

    return psutil.Process(conn.execute("SELECT pg_backend_pid()").fetchone()[0]).ppid()


class RssSampler:
    """Samples the resident set size of process ``pid`` plus all its descendants every
    ``interval`` seconds in a thread; ``peak`` and ``first`` are in bytes."""

    def __init__(self, pid: int, interval: float = 0.05):
        import psutil

        self._psutil = psutil
        self.proc = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self.first = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")
        self._thread.start()

    def sample(self) -> int:
        total = 0
        try:
            procs = [self.proc, *self.proc.children(recursive=True)]
        except self._psutil.Error:
            return 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except self._psutil.Error:
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self.sample()
            if rss:
                self.samples += 1
                self.first = self.first or rss
                self.peak = max(self.peak, rss)
            self._stop.wait(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(2)
        return self.peak


def mib(nbytes: float) -> float:
    return round(nbytes / 1048576.0, 1)


def self_peak_rss_mib() -> float:
    """Peak RSS of this process (getrusage; Linux reports KiB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


# --- waiting ----------------------------------------------------------------------------


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    poll: float = 0.02,
    alive: Callable[[], str | None] | None = None,
) -> float:
    """Poll ``check`` until true; return the perf_counter when it was seen true. Raise
    BenchFailed after ``timeout`` s or when ``alive()`` returns a reason (a dead process)."""
    deadline = time.perf_counter() + timeout
    while True:
        if check():
            return time.perf_counter()
        if alive is not None:
            dead = alive()
            if dead:
                raise BenchFailed(f"{dead} while waiting for {what}")
        if time.perf_counter() > deadline:
            raise BenchFailed(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


def index_only_polls(conn: Any) -> None:
    """The connection that polls a draining queue reads it through the partial indexes of
    the live states, never by a scan of the table (which, late in a drain, would walk every
    dead row and slow the system under test)."""
    conn.execute("SET enable_seqscan = off")


def poll_interval(n: int) -> float:
    """How often a drain of ``n`` jobs is polled for its end: 20 ms for the 20,000 of a
    drain, up to 100 ms for long ones (a resolution well under 1% of the time)."""
    return min(0.1, max(0.02, n / 2_000_000))


async def paced_producer(
    enqueue_one: Callable[[int], Awaitable[Any]], rate: float, duration: float
) -> dict[int, tuple[float, float]]:
    """Call ``await enqueue_one(seq)`` at ``rate``/s for ``duration`` s on an open-loop
    schedule (a late call does not delay the next ones). Returns {seq: (t_before, t_after)}
    in time.time() seconds."""
    import asyncio

    sent: dict[int, tuple[float, float]] = {}
    interval = 1.0 / rate
    start = time.monotonic()
    for seq in range(int(rate * duration)):
        delay = start + seq * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        t0 = time.time()
        await enqueue_one(seq)
        sent[seq] = (t0, time.time())
    return sent


def paced_producer_sync(
    enqueue_one: Callable[[int], Any], rate: float, duration: float
) -> dict[int, tuple[float, float, Any]]:
    """The same for a blocking ``enqueue_one(seq)``; its return value is kept:
    {seq: (t_before, t_after, returned)}."""
    sent: dict[int, tuple[float, float, Any]] = {}
    interval = 1.0 / rate
    start = time.monotonic()
    for seq in range(int(rate * duration)):
        delay = start + seq * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        t0 = time.time()
        out = enqueue_one(seq)
        sent[seq] = (t0, time.time(), out)
    return sent


def _load_prctl() -> Any:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _load_prctl()  # resolved here: between fork and exec nothing may be imported


def die_with_parent() -> None:
    """``preexec_fn`` for the processes a measurement starts: they get SIGTERM when the
    measurement process dies, however it dies (Linux's PR_SET_PDEATHSIG; elsewhere a no-op).
    """
    if _PRCTL is not None:
        _PRCTL(1, 15)  # PR_SET_PDEATHSIG, SIGTERM


def main_guard(fn: Callable[[], None]) -> None:
    """Run ``fn``; a BenchFailed prints one line and exits 1 (any other exception exits 1
    with its traceback). SIGTERM is turned into KeyboardInterrupt, so that what the
    measurement started is stopped by its ``finally`` blocks."""
    import signal

    def _term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _term)
    try:
        fn()
    except BenchFailed as exc:
        log(f"FAILED: {exc}")
        sys.exit(1)
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo), for a report's machine line."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def pgsched_version() -> str:
    """pgsched's installed version and the checkout's commit (``git describe``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("pgsched")
    except PackageNotFoundError:
        text = "(not installed)"
    try:
        commit = subprocess.run(
            [
                "git",
                "-C",
                str(Path(__file__).resolve().parents[2]),
                "describe",
                "--always",
                "--dirty",
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    return f"{text} at {commit}" if commit else text
