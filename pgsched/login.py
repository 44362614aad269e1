"""Where a process's database login comes from, read once at its start: ``--dsn`` or
``PGSCHED_DSN`` (the connection string itself), ``--dsn-file`` or ``PGSCHED_DSN_FILE`` (a
file that holds it; ``-`` for standard input), and libpq's own variables that carry or
locate a credential (``PGPASSWORD``, ``PGPASSFILE``, ...; libpq's "Environment Variables"
page). Else the embedded server (:mod:`pgsched.embedded`).

Once read, the login is held in the connection string alone: libpq's credential variables
are written into it as the keywords they stand for (``PGPASSWORD`` as ``password``,
``PGPASSFILE`` as ``passfile``), so that a long-running process may take them out of its
environment and nothing it starts later inherits them (:mod:`pgsched.secrecy`, which also
wipes them from what /proc shows of it). A keyword the connection string gives itself
wins, as in libpq.
One difference from libpq: a variable folded in this way also wins over a service file's
value for the same keyword (libpq lets the service file win); set a credential in one place.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections.abc import Mapping

from .errors import ConfigError

log = logging.getLogger(__name__)

#: libpq's variables that carry or locate a credential, and the connection keyword each
#: stands for (libpq's "Environment Variables" and "Parameter Key Words" pages);
#: ``servicefile`` is a keyword from libpq 18 on.
LIBPQ_CREDENTIALS = {
    "PGPASSWORD": "password",
    "PGPASSFILE": "passfile",
    "PGSERVICE": "service",
    "PGSERVICEFILE": "servicefile",
    "PGSSLKEY": "sslkey",
    "PGSSLCERT": "sslcert",
}

#: Every variable that carries or locates pgsched's login: never passed to a process a
#: worker starts (a command, its guardian), and wiped from /proc/PID/environ.
#: ``PGSYSCONFDIR`` says where libpq looks for ``pg_service.conf``.
CREDENTIAL_ENV = frozenset(
    {"PGSCHED_DSN", "PGSCHED_DSN_FILE", "PGSCHED_TEST_DSN", "PGSYSCONFDIR", *LIBPQ_CREDENTIALS}
)

#: The most a DSN file may hold (bytes): a connection string, not a data file.
MAX_DSN_FILE_BYTES = 64 * 1024


def choose(
    dsn: str | None, dsn_file: str | None, dsn_on_command_line: bool, file_on_command_line: bool
) -> tuple[str, str] | None:
    """Which of ``--dsn`` / ``PGSCHED_DSN`` and ``--dsn-file`` / ``PGSCHED_DSN_FILE`` gives
    the login: ``("dsn", value)``, ``("dsn_file", path)`` or None (neither: the embedded
    server). An empty value counts as not given; the command line wins over the
    environment. Raises ConfigError when both are given at the same level."""
    dsn, dsn_file = dsn or None, dsn_file or None
    if dsn is not None and dsn_file is not None:
        if dsn_on_command_line == file_on_command_line:
            where = (
                "--dsn and --dsn-file"
                if dsn_on_command_line
                else "PGSCHED_DSN and PGSCHED_DSN_FILE"
            )
            raise ConfigError(f"dsn: {where} are both given: give the database one way")
        return ("dsn", dsn) if dsn_on_command_line else ("dsn_file", dsn_file)
    if dsn is not None:
        return ("dsn", dsn)
    if dsn_file is not None:
        return ("dsn_file", dsn_file)
    return None


def read_dsn_file(path: str) -> str:
    """The DSN held in the file ``path`` (its text, surrounding blank space and a final
    newline left out), read and closed at once; ``-`` reads standard input to its end and
    then points it at /dev/null, so that nothing started later inherits it. Handed in on
    standard input by a supervisor that opened the file (systemd's ``StandardInput=file:``,
    or ``pgsched worker --dsn-file - < FILE`` run by a user who may read FILE), the file
    itself may be unreadable to the worker's own user, and so to its commands. Raises
    ConfigError naming the path when it cannot be read, is empty or is larger than
    MAX_DSN_FILE_BYTES. A file other users may read is warned about (as libpq does of a
    password file)."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_DSN_FILE_BYTES + 1)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        else:
            with open(path, "rb") as f:
                mode = os.fstat(f.fileno()).st_mode
                data = f.read(MAX_DSN_FILE_BYTES + 1)
            if stat.S_ISREG(mode) and mode & (stat.S_IRGRP | stat.S_IROTH):
                log.warning(
                    "dsn_file %s may be read by other users (mode %04o): chmod 600 it",
                    path,
                    stat.S_IMODE(mode),
                )
    except OSError as exc:
        raise ConfigError(f"dsn_file: {path!r} cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_DSN_FILE_BYTES:
        raise ConfigError(
            f"dsn_file: {path!r} holds more than {MAX_DSN_FILE_BYTES} bytes: "
            "it must hold one connection string"
        )
    try:
        dsn = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"dsn_file: {path!r} is not UTF-8 text") from None
    if not dsn:
        raise ConfigError(f"dsn_file: {path!r} is empty: it must hold a connection string")
    return dsn


def libpq_keyword(name: str) -> str | None:
    """The connection keyword this libpq knows for credential variable ``name``
    (:data:`LIBPQ_CREDENTIALS`), None without one (``PGSERVICEFILE`` before libpq 18,
    ``PGSYSCONFDIR``): libpq must keep reading such a variable from the environment."""
    keyword = LIBPQ_CREDENTIALS.get(name)
    if keyword == "servicefile":
        from psycopg import pq

        return keyword if pq.version() >= 180000 else None
    return keyword


def libpq_credentials(environ: Mapping[str, str]) -> dict[str, str]:
    """libpq's credential variables set in ``environ`` (``os.environ``) that have a
    keyword (:func:`libpq_keyword`), as ``{keyword: value}``, for :func:`with_credentials`;
    once they are in the DSN, :func:`pgsched.secrecy.conceal` may take them out of the
    environment, and a variable without a keyword stays there for libpq, kept from the
    processes a worker starts all the same (:data:`CREDENTIAL_ENV`)."""
    found = {}
    for name in LIBPQ_CREDENTIALS:
        keyword = libpq_keyword(name)
        if keyword is not None and environ.get(name) is not None:
            found[keyword] = environ[name]
    return found


def with_credentials(dsn: str, credentials: dict[str, str]) -> str:
    """``dsn`` with each of ``credentials`` (``{keyword: value}``) that it does not give
    itself; ``dsn`` unchanged when there are none. Raises ConfigError for a DSN libpq
    cannot parse (without repeating it: it may hold a password)."""
    if not credentials:
        return dsn
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        given = conninfo_to_dict(dsn)
    except ProgrammingError:
        raise ConfigError("dsn: not a connection string libpq can read") from None
    return make_conninfo(dsn, **{k: v for k, v in credentials.items() if k not in given})


def has_password(dsn: str) -> bool:
    """Whether connection string ``dsn`` gives a password itself (False for one libpq
    cannot parse)."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        return bool(conninfo_to_dict(dsn).get("password"))
    except ProgrammingError:
        return False
