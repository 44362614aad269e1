"""Every connection pgsched opens has TCP keepalives and a TCP user timeout unless its DSN
sets them; a statement given a deadline is cut when its reply does not come, and a
server's own statement_timeout fires before the client's deadline (pgsched.db,
pgsched.deadline)."""

from __future__ import annotations

import socket
import time

import pytest
from psycopg.conninfo import make_conninfo

from pgsched.db import Database, Session, connect
from pgsched.deadline import Deadline
from pgsched.errors import ConnectionSilent, DatabaseError

from ..silent_proxy import SilentProxy


@pytest.fixture
def proxy(dsn):
    """TCP in front of the test server (its own socket is a Unix one, where keepalives are
    no-ops)."""
    p = SilentProxy(dsn)
    yield p
    p.close()


def _tcp(conn) -> dict[str, int]:
    with socket.socket(fileno=__import__("os").dup(conn.fileno())) as s:
        return {
            "keepalive": s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "idle": s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            "interval": s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            "count": s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            "user_timeout_ms": s.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        }


DEFAULTS = {"keepalive": 1, "idle": 10, "interval": 5, "count": 3, "user_timeout_ms": 30000}


def test_dedicated_and_pooled_connections_have_keepalives_and_a_tcp_user_timeout(proxy):
    with connect(proxy.dsn) as conn:
        assert _tcp(conn) == DEFAULTS
    db = Database.connect(proxy.dsn)
    try:
        with db.pool.connection() as conn:
            assert _tcp(conn) == DEFAULTS
    finally:
        db.close()


def test_keepalive_settings_of_the_dsn_are_kept(proxy):
    own = make_conninfo(proxy.dsn, keepalives_idle="42", tcp_user_timeout="7000")
    with connect(own) as conn:
        assert _tcp(conn) == {**DEFAULTS, "idle": 42, "user_timeout_ms": 7000}
    db = Database.connect(own)
    try:
        with db.pool.connection() as conn:
            assert _tcp(conn) == {**DEFAULTS, "idle": 42, "user_timeout_ms": 7000}
    finally:
        db.close()


def test_a_statement_on_a_silent_connection_is_cut_at_its_deadline(proxy):
    deadline = Deadline(1.0, name="test")
    conn = connect(proxy.dsn, deadline=deadline)
    session = Session(conn, deadline)
    assert session.one("clock_now") is not None
    proxy.blackhole()
    began = time.monotonic()
    with pytest.raises(ConnectionSilent, match="no reply within the test statement deadline"):
        session.one("clock_now")
    took = time.monotonic() - began
    assert 1.0 <= took < 2.0, took  # the deadline, plus at most a watchdog tick (a quarter of it)
    assert conn.closed or conn.broken
    conn.close()
    with connect(proxy.dsn, deadline=deadline) as fresh:  # new connections are forwarded again
        assert Session(fresh, deadline).one("clock_now") is not None


def test_a_silent_pool_raises_at_the_deadline_and_is_replaced(proxy):
    db = Database.connect(proxy.dsn, min_size=3, max_size=3, statement_deadline=1.0)
    try:
        db.pool.wait(10)  # all three connections open
        proxy.blackhole()
        with pytest.raises(ConnectionSilent):
            db.now()
        began = time.monotonic()
        for _ in range(3):  # the other two silent ones were replaced too: none waits out a deadline
            db.now()
        assert time.monotonic() - began < 1.0
    finally:
        db.close()


def test_the_servers_statement_timeout_fires_before_the_deadline(dsn, sql):
    name = sql.execute("SELECT current_database() AS d").fetchone()["d"]
    sql.execute(f"ALTER DATABASE {name} SET statement_timeout = '1s'")
    db = Database.connect(dsn, statement_deadline=0.5)
    try:
        assert db.deadline is not None and db.deadline.seconds == 6.0  # 1 s + the 5 s margin
        with pytest.raises(DatabaseError, match="statement timeout") as raised:
            with db.transaction() as tx:
                tx.conn.execute("SELECT pg_sleep(3)")
        assert not isinstance(raised.value, ConnectionSilent)
    finally:
        db.close()
