"""A database error of a named query names the query and its file and line (pgsched.db):
as a note on the psycopg error, whose type is kept, and on the pgsched error it becomes."""

from __future__ import annotations

import traceback

import pytest
from psycopg import errors as pg_errors

from pgsched import queries
from pgsched.errors import DatabaseError, NotFound


def where(name: str) -> str:
    return f"query {name!r} (sql/{queries.get(name).source})"


def test_a_failed_statement_names_its_query_file_and_line(db):
    with pytest.raises(DatabaseError) as info:
        db.one("api_dlq_delete", id="not a number", tenant="default")
    assert where("api_dlq_delete") in info.value.__notes__
    assert where("api_dlq_delete").startswith("query 'api_dlq_delete' (sql/api.sql:")
    assert str(info.value).startswith(
        "invalid input syntax for type bigint"
    )  # the message is unchanged
    cause = info.value.__cause__
    assert isinstance(cause, pg_errors.InvalidTextRepresentation)  # the original type, noted too
    assert where("api_dlq_delete") in cause.__notes__
    assert where("api_dlq_delete") in "".join(traceback.format_exception(info.value))


def test_an_error_raised_by_a_function_names_the_query_that_called_it(db):
    with pytest.raises(NotFound, match="no task named 'nope'") as info:
        db.one("task_pause", name="nope", tenant="default")
    assert info.value.__notes__ == [where("task_pause")]
    assert isinstance(info.value.__cause__, pg_errors.NoDataFound)


def test_in_a_transaction_the_failed_query_is_named_once(db):
    with pytest.raises(DatabaseError) as info, db.transaction() as tx:
        tx.one("clock_now")
        tx.one("api_dlq_delete", id="x", tenant="default")
    assert info.value.__notes__ == [where("api_dlq_delete")]
