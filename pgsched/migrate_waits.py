"""Who a migrator waits for: a watch on a connection of its own that asks PostgreSQL, every
few seconds, which sessions block the migrator's (``pg_blocking_pids``), and says so.

A migration waits for every lock it needs: the migrator's advisory lock (any login may take
any advisory key, pgsched's constant one too) and the table locks of its DDL (``ALTER
TABLE`` waits for every open transaction that read the table). Without the watch such a
wait is silent and endless; with it the operator reads which login, application and
process holds it, and ``lock_timeout`` (``pgsched migrate --lock-timeout``) bounds it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from .db import Session, connect


@dataclass(frozen=True)
class Blocker:
    """A session the migrator waits for: its backend ``pid``, ``login``, ``application``
    name, ``client`` address (None on a Unix socket), and ``since``, when its transaction
    began (None when this login may not read it)."""

    pid: int
    login: str | None
    application: str | None
    client: str | None
    since: str | None

    def __str__(self) -> str:
        parts = [f"pid {self.pid}", f"login {self.login or '?'}"]
        if self.application:
            parts.append(f"application {self.application!r}")
        if self.client:
            parts.append(f"from {self.client}")
        if self.since:
            parts.append(f"in a transaction since {self.since}")
        return " ".join(parts)


def describe(blockers: list[Blocker]) -> str:
    """One line naming ``blockers`` (pg_terminate_backend(pid) ends one)."""
    return "; ".join(str(b) for b in blockers)


class BlockerWatch:
    """Watches backend ``pid`` from a connection of its own to ``dsn``: every ``every``
    seconds while the migrator runs (the connection made only once it has run that long),
    reads who blocks it into ``last`` (empty when nothing does), and calls ``say`` with a
    line once the same sessions have blocked it at two reads in a row (a wait of
    milliseconds is no news), and again every ten reads it lasts. A watch that cannot
    connect says nothing: the migration reports its own errors."""

    def __init__(self, dsn: str, pid: int, say: Callable[[str], None], every: float = 1.0):
        self.dsn, self.pid, self.say, self.every = dsn, pid, say, every
        self.last: list[Blocker] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgsched migrate watch", daemon=True)

    def __enter__(self) -> BlockerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every + 5)

    def _run(self) -> None:
        if self._stop.wait(self.every):
            return
        try:
            conn = connect(self.dsn, autocommit=True, application_name="pgsched migrate watch")
        except psycopg.Error:
            return
        with conn:
            session, seen, reads = Session(conn), "", 0
            while True:
                try:
                    rows = session.many("migration_blockers", pid=self.pid)
                except psycopg.Error:
                    return
                self.last = [_blocker(r) for r in rows]
                now = describe(self.last)
                reads = reads + 1 if now and now == seen else 0
                if reads % 10 == 1:
                    self.say(f"migrate: waiting for a lock held by {now}")
                seen = now
                if self._stop.wait(self.every):
                    return


def _blocker(row: dict) -> Blocker:
    since = row["xact_start"]
    return Blocker(
        row["pid"],
        row["login"],
        row["application"] or None,
        row["client"],
        since.isoformat(timespec="seconds") if since is not None else None,
    )
