"""A local TCP proxy in front of the test server that can make the connections it carries
go silent: a stand-in for a proxy or middlebox that stops forwarding while the sockets stay
open and acknowledged (TCP keepalives are answered by the kernels at both ends, so they
notice nothing).

``SilentProxy(dsn)`` listens on 127.0.0.1 (an ephemeral port) and forwards each
connection to the server of ``dsn`` (a TCP address, or a Unix socket folder as the
embedded test server has). :meth:`blackhole` makes every connection open now (or those of
one ``application_name``, read from the startup message) forward nothing either way from
then on (what arrives from either end is read and dropped, and counted); connections accepted later are
forwarded as usual, as a middlebox that lost its state forwards new flows.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket):
        self.client, self.server = client, server
        self.silent = self.closed = False
        self.application_name: str | None = None
        # bytes dropped since it went silent: from the client (a statement that is never
        # delivered) and from the server (the reply to one that was forwarded just before)
        self.dropped = 0
        self._start = b""
        self._ended = 0
        self._lock = threading.Lock()

    def pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                if src is self.client and self.application_name is None and len(self._start) < 8192:
                    self._start += data
                    name = self._start.partition(b"application_name\x00")[2]
                    if b"\x00" in name:
                        self.application_name = name.partition(b"\x00")[0].decode()
                if not self.silent:
                    dst.sendall(data)
                else:
                    self.dropped += len(data)
        except OSError:
            pass
        if not self.silent:  # a silent pair never tells either end anything, not even a close
            for s in (self.client, self.server):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        with self._lock:
            self._ended += 1
            if self._ended == 2:  # both directions done
                self.close()

    def close(self) -> None:
        self.closed = True
        for s in (self.client, self.server):
            s.close()


class SilentProxy:
    def __init__(self, dsn: str):
        info = conninfo_to_dict(dsn)
        host, port = info.get("host") or "localhost", int(info.get("port") or 5432)
        self._upstream: tuple[int, str | tuple[str, int]] = (
            (socket.AF_UNIX, str(Path(host) / f".s.PGSQL.{port}"))
            if host.startswith("/")
            else (socket.AF_INET, (host, port))
        )
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.dsn = make_conninfo(dsn, host="127.0.0.1", port=str(self.port))
        self._pairs: list[_Pair] = []  # forwarding
        self._all: list[_Pair] = []
        self._silenced: list[_Pair] = []
        self._lock = threading.Lock()
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True, name="silent-proxy").start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            family, address = self._upstream
            server = socket.socket(family, socket.SOCK_STREAM)
            try:
                server.connect(address)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, server)
            with self._lock:
                self._pairs.append(pair)
                self._all.append(pair)
                self.accepted += 1
            threading.Thread(target=pair.pump, args=(client, server), daemon=True).start()
            threading.Thread(target=pair.pump, args=(server, client), daemon=True).start()

    def blackhole(self, application_name: str | None = None) -> int:
        """Every connection open now (of ``application_name``, if given) forwards nothing
        from now on; how many there were."""
        with self._lock:
            silenced = [p for p in self._pairs if application_name in (None, p.application_name)]
            for pair in silenced:
                pair.silent = True
            self._pairs = [p for p in self._pairs if not p.silent]
        self._silenced.extend(silenced)
        return len(silenced)

    def dropped(self, application_name: str) -> int:
        """Bytes dropped, either way, on silenced connections of ``application_name`` since
        they went silent: a statement that is never delivered, or one that was delivered just
        before and whose reply is never passed on. Either way it is never answered."""
        return sum(p.dropped for p in self._silenced if p.application_name == application_name)

    def open_connections(self, application_name: str) -> int:
        """Forwarding connections of ``application_name``."""
        with self._lock:
            return sum(
                1 for p in self._pairs if p.application_name == application_name and not p.closed
            )

    def close(self) -> None:
        """Stop listening and close every connection (silent ones too)."""
        self._listener.close()
        with self._lock:
            for pair in self._all:
                for s in (pair.client, pair.server):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
