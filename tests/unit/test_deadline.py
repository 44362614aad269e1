"""Deadline (pgsched.deadline) on real sockets (a socketpair stands for a connection whose
peer went silent): a blocked read is cut at its deadline, or when its process stops; a
statement that ended is never touched."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from pgsched.deadline import STOP_GRACE, Deadline, above_server_timeout
from pgsched.errors import ConnectionSilent


class Conn:
    """The end of a socketpair whose peer never writes: what a silent server looks like."""

    def __init__(self) -> None:
        self.sock, self.peer = socket.socketpair()

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()
        self.peer.close()


@pytest.fixture
def conn():
    c = Conn()
    yield c
    c.close()


def _blocked_read(deadline: Deadline, conn: Conn) -> float:
    began = time.monotonic()
    with pytest.raises(ConnectionSilent):
        with deadline.watch(conn):
            if conn.sock.recv(1) == b"":  # shut down: end of file, as libpq sees it
                raise OSError("server closed the connection unexpectedly")
    return time.monotonic() - began


def test_a_blocked_read_is_cut_at_its_deadline(conn):
    deadline = Deadline(0.4, name="test")
    took = _blocked_read(deadline, conn)
    assert 0.4 <= took < 0.4 + 0.3, took  # within a tick (a quarter of the deadline) or so
    assert deadline.cuts == 1


def test_a_stop_cuts_a_statement_in_flight_past_the_grace(conn):
    stop = threading.Event()
    deadline = Deadline(60.0, name="test", stop=stop)
    threading.Timer(0.2, stop.set).start()
    took = _blocked_read(deadline, conn)
    assert STOP_GRACE <= took < STOP_GRACE + 1.2, took


def test_cut_ends_what_is_in_flight_now(conn):
    deadline = Deadline(60.0, name="test")
    threading.Timer(0.2, deadline.cut).start()
    assert _blocked_read(deadline, conn) < 1.0


def test_a_statement_that_ended_is_never_cut(conn):
    deadline = Deadline(0.2, name="test")
    with deadline.watch(conn):
        pass
    other = Conn()
    try:  # cut at its deadline, after the ended one's had passed: the watchdog looked meanwhile
        _blocked_read(deadline, other)
    finally:
        other.close()
    conn.peer.sendall(b"x")
    assert conn.sock.recv(1) == b"x"  # untouched
    assert deadline.cuts == 1


def test_the_servers_statement_timeout_fires_first():
    assert above_server_timeout(30.0, 0.0) == 30.0
    assert above_server_timeout(30.0, 10.0) == 30.0
    assert above_server_timeout(30.0, 60.0) == 65.0
