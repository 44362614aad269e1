"""The exception tree of pgsched. Every error a user can cause is one of these,
and its message names the field and the value that were wrong::

    PgschedError
    ├── ConfigError            bad settings, DSN, flags
    ├── ValidationError        bad task / schedule / crontab input (has .field, .value)
    ├── NotFound               a task or execution that does not exist
    ├── LockTimeout            a lock (pgsched.locks) was not got within its wait
    ├── DatabaseError          psycopg errors, translated at the boundary in db.py
    │   ├── ConnectionFailed   the server could not be reached, or the connection broke
    │   │   └── ConnectionSilent  no reply within the statement deadline: the connection was shut down
    │   ├── TransientError     deadlock, serialization failure, lock timeout: try again
    │   └── PermissionDenied   the database refused this login (42501): another tenant's, or no right
    └── MigrationError         schema and code disagree
        ├── ChecksumMismatch   an applied migration file was changed
        ├── SchemaAhead        the database has migrations this code does not know
        └── SchemaBehind       the database lacks migrations: run ``pgsched migrate``
"""

from __future__ import annotations


class PgschedError(Exception):
    """Base of every pgsched error."""


class ConfigError(PgschedError):
    """Settings, DSN or command-line flags are wrong."""


class ValidationError(PgschedError):
    """Input for a task, schedule or crontab line is invalid.

    ``field`` names the offending field and ``value`` holds what was given; the message
    shows at most :data:`SHOWN` characters of it (a megabyte sent in a field is not echoed
    back whole, nor written whole to a log).
    """

    SHOWN = 200

    def __init__(self, field: str, value: object, reason: str):
        self.field = field
        self.value = value
        self.reason = reason
        shown = repr(value)
        if len(shown) > self.SHOWN:
            shown = f"{shown[: self.SHOWN]}… ({len(shown)} characters)"
        super().__init__(f"{field}: {shown} {reason}")


class NotFound(PgschedError):
    """A task or execution named by the caller does not exist."""


class LockTimeout(PgschedError):
    """A lock of :mod:`pgsched.locks` was not got within the wait asked for: another
    session holds it (``pgsched lock list`` shows which). ``name`` is the lock's name,
    ``timeout`` the seconds waited (0: only tried)."""

    def __init__(self, name: str, timeout: float):
        self.name, self.timeout = name, timeout
        waited = "held (tried once, no wait asked)" if timeout == 0 else f"not got in {timeout:g} s"
        super().__init__(
            f"lock {name!r}: {waited}; another session holds it (pgsched lock list shows which)"
        )


class DatabaseError(PgschedError):
    """An error reported by PostgreSQL, translated from psycopg."""


class ConnectionFailed(DatabaseError):
    """PostgreSQL could not be reached."""


class ConnectionSilent(ConnectionFailed):
    """A statement had no reply within its client-side deadline (pgsched.deadline), so its
    connection was shut down; open another one."""


class TransientError(DatabaseError):
    """The statement lost a race (deadlock, serialization failure, lock not available);
    the same work may succeed if tried again."""


class PermissionDenied(DatabaseError):
    """The database refused the statement to this login (SQLSTATE 42501
    insufficient_privilege): a tenant's login asking for another tenant, or a role without
    the right (docs/security.md)."""


class MigrationError(PgschedError):
    """The database schema and this version of pgsched disagree."""


class ChecksumMismatch(MigrationError):
    """An already applied migration file has changed since it was applied."""


class SchemaAhead(MigrationError):
    """The database holds migrations newer than this code knows."""


class SchemaBehind(MigrationError):
    """The database is missing migrations; run ``pgsched migrate``."""
