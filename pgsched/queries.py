"""Named SQL queries, read once from ``sql/*.sql``.

Each query starts with a header line ``-- name: <name> :<cardinality>`` where the
cardinality is ``one`` (at most one row), ``many`` (rows), or ``exec`` (no rows; the
row count is returned). Comment lines right after the header describe it. One statement
per query; parameters are ``%(name)s`` only (psycopg's named placeholders), so a literal
percent sign is written ``%%``. The format follows River's sqlc headers and procrastinate's
``queries.sql``.

``sql/schema.sql`` is not a query file: it is the schema dump that ``tests/schema_snapshot.py``
writes (for reading; the migrations make the schema). The loader skips it explicitly, by
name (SNAPSHOT), rather than by lacking headers, so that it can never be read as queries.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import LiteralString, cast

from .resources import resource_dir

_HEADER = re.compile(
    r"^-- name: (?P<name>[a-z][a-z0-9_]*) :(?P<card>one|many|exec)(?P<binary> binary)?\s*$"
)
_CARDINALITIES = ("one", "many", "exec")
# The checked-in schema dump beside the query files (not queries; see the module docstring).
SNAPSHOT = "schema.sql"


@dataclass(frozen=True)
class Query:
    """One named statement: ``text`` is sent as is; ``cardinality`` is one/many/exec;
    ``binary``: parameters and results travel in PostgreSQL's binary format (header
    ``-- name: x :exec binary``), much cheaper to encode for big arrays of timestamps;
    only for statements whose parameters are all typed by casts or context."""

    name: str
    cardinality: str
    text: LiteralString
    source: str
    binary: bool = False


def parse(text: str, source: str) -> dict[str, Query]:
    """Split one ``.sql`` file's ``text`` into named queries.

    Raises ValueError naming ``source`` and the line for a malformed header, text before
    the first header, a duplicate name, or an empty body.
    """
    found: dict[str, Query] = {}
    name = card = None
    binary = False
    body: list[str] = []
    start = 0

    def close() -> None:
        if name is None:
            return
        sql = "\n".join(body).strip().rstrip(";").strip()
        if not sql:
            raise ValueError(f"{source}:{start}: query {name!r} has no statement")
        if name in found:
            raise ValueError(f"{source}:{start}: query {name!r} is defined twice")
        found[name] = Query(
            name, cast(str, card), cast(LiteralString, sql), f"{source}:{start}", binary
        )

    for no, line in enumerate(text.splitlines(), 1):
        if line.startswith("-- name:"):
            match = _HEADER.match(line)
            if not match:
                raise ValueError(f"{source}:{no}: malformed header {line!r}")
            close()
            name, card, body, start = match["name"], match["card"], [], no
            binary = bool(match["binary"])
        elif name is None:
            if line.strip() and not line.lstrip().startswith("--"):
                raise ValueError(f"{source}:{no}: SQL before the first '-- name:' header")
        elif not line.lstrip().startswith("--"):
            body.append(line)
    close()
    return found


@functools.cache
def registry(folder: Path | None = None) -> dict[str, Query]:
    """All queries of every ``*.sql`` file in ``folder`` (default: the shipped ``sql/``) but
    the schema dump ``schema.sql`` (SNAPSHOT), read once per process. Raises ValueError for a
    name defined in two files."""
    folder = folder or resource_dir("sql")
    queries: dict[str, Query] = {}
    for path in sorted(folder.glob("*.sql")):
        if path.name == SNAPSHOT:
            continue
        for name, query in parse(path.read_text(), path.name).items():
            if name in queries:
                raise ValueError(
                    f"query {name!r} is defined in {queries[name].source} and {query.source}"
                )
            queries[name] = query
    return queries


def get(name: str) -> Query:
    """The query called ``name``; KeyError with the name if there is none."""
    try:
        return registry()[name]
    except KeyError:
        raise KeyError(f"no SQL query named {name!r} in sql/*.sql") from None
