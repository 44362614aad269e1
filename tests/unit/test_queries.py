"""Unit tests for pgsched.queries: the ``-- name:`` format of sql/*.sql, and that the
queries the code calls and the queries the files define are the same set."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pgsched import queries
from pgsched.queries import parse, registry

from ..helpers import REPO

SQL_DIR = REPO / "sql"
PACKAGE = REPO / "pgsched"
HEADER = re.compile(r"^-- name: ([a-z][a-z0-9_]*) :(one|many|exec)(?: binary)?\s*$", re.MULTILINE)


def test_parse_reads_names_cardinalities_and_bodies():
    text = (
        "-- A file comment before any query is fine.\n"
        "\n"
        "-- name: thing_get :one\n"
        "-- What it does (dropped from the body).\n"
        "SELECT *\n"
        "  FROM thing\n"
        " WHERE id = %(id)s;\n"
        "\n"
        "-- name: thing_list :many\n"
        "SELECT * FROM thing\n"
        "-- name: thing_touch :exec\n"
        "UPDATE thing SET n = n + 1\n"
    )
    found = parse(text, "thing.sql")
    assert list(found) == ["thing_get", "thing_list", "thing_touch"]
    get = found["thing_get"]
    assert (get.name, get.cardinality, get.source) == ("thing_get", "one", "thing.sql:3")
    assert get.text == "SELECT *\n  FROM thing\n WHERE id = %(id)s"  # comment and ';' gone
    assert found["thing_list"].cardinality == "many"
    assert found["thing_list"].source == "thing.sql:9"
    assert found["thing_touch"].text == "UPDATE thing SET n = n + 1"


@pytest.mark.parametrize(
    "header",
    [
        "-- name: thing :all",  # unknown cardinality
        "-- name: Thing :one",  # names are lower case
        "-- name: thing",  # no cardinality
        "-- name:thing :one",
        "-- name: thing :one extra",
        "-- name: 1thing :one",
    ],
)
def test_malformed_header_is_an_error_with_file_and_line(header):
    text = f"-- name: ok :one\nSELECT 1\n{header}\nSELECT 2\n"
    with pytest.raises(ValueError, match=r"^x\.sql:3: malformed header") as info:
        parse(text, "x.sql")
    assert repr(header) in str(info.value)


def test_sql_before_the_first_header_is_an_error():
    with pytest.raises(ValueError, match=r"^x\.sql:2: SQL before the first '-- name:' header"):
        parse("-- comment\nSELECT 1;\n-- name: a :one\nSELECT 2\n", "x.sql")


def test_duplicate_name_in_one_file_is_an_error():
    text = "-- name: a :one\nSELECT 1\n-- name: b :one\nSELECT 2\n-- name: a :many\nSELECT 3\n"
    with pytest.raises(ValueError, match=r"^x\.sql:5: query 'a' is defined twice"):
        parse(text, "x.sql")


@pytest.mark.parametrize(
    "text",
    [
        "-- name: a :one\n",
        "-- name: a :one\n-- only a comment\n\n",
        "-- name: a :one\n;\n",
        "-- name: a :one\n-- name: b :one\nSELECT 1\n",
    ],
)
def test_empty_body_is_an_error(text):
    with pytest.raises(ValueError, match=r"^x\.sql:1: query 'a' has no statement"):
        parse(text, "x.sql")


def test_registry_of_a_folder_refuses_a_name_defined_in_two_files(tmp_path: Path):
    (tmp_path / "a.sql").write_text("-- name: same :one\nSELECT 1\n")
    (tmp_path / "b.sql").write_text("-- name: same :one\nSELECT 2\n")
    with pytest.raises(ValueError, match=r"'same' is defined in a\.sql:1 and b\.sql:1"):
        registry(tmp_path)


def test_registry_loads_every_query_of_every_sql_file():
    files = sorted(p for p in SQL_DIR.glob("*.sql") if p.name != queries.SNAPSHOT)
    assert files, f"no .sql files in {SQL_DIR}"
    expected: dict[str, str] = {}
    for path in files:
        for name, card in HEADER.findall(path.read_text()):
            assert name not in expected, f"{name} appears twice in sql/"
            expected[name] = card
    loaded = registry()
    assert {n: q.cardinality for n, q in loaded.items()} == expected
    for name, query in loaded.items():
        assert query.text.strip(), name
        assert ";" not in query.text.rstrip()[-1:], f"{name} keeps its trailing semicolon"


def test_get_unknown_query_names_it():
    with pytest.raises(KeyError, match="no_such_query"):
        queries.get("no_such_query")


def calls_in_code() -> list[tuple[str, str, str]]:
    """(query name, cardinality called as, where) for every ``x.one("name", ...)``,
    ``x.many(...)`` and ``x.exec(...)`` call in the package. The AST is used, not a regex
    over the text, so examples in docstrings are not mistaken for calls."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("one", "many", "exec")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.append(
                    (node.args[0].value, node.func.attr, f"{path.relative_to(REPO)}:{node.lineno}")
                )
    return found


def test_the_scan_finds_calls():
    # Guards the two tests below against passing because the scan found nothing.
    names = {name for name, _, _ in calls_in_code()}
    assert {
        "execution_claim",
        "scheduler_fire",
        "task_insert",
        "migration_applied",
    } <= names


def test_every_query_the_code_calls_exists_with_that_cardinality():
    known = registry()
    wrong = []
    for name, called_as, where in calls_in_code():
        if name not in known:
            wrong.append(f"{where}: {name!r} is not in sql/*.sql")
        elif known[name].cardinality != called_as:
            wrong.append(
                f"{where}: {name!r} is :{known[name].cardinality}, called as .{called_as}()"
            )
    assert wrong == []


def test_every_query_in_sql_is_used_by_the_code():
    used = {name for name, _, _ in calls_in_code()}
    assert sorted(set(registry()) - used) == []


def test_a_binary_header_marks_the_query_binary():
    found = parse("-- name: a :exec binary\nSELECT 1\n-- name: b :one\nSELECT 2\n", "x.sql")
    assert (found["a"].binary, found["b"].binary) == (True, False)
    assert found["a"].cardinality == "exec"


def test_every_query_is_named_after_its_file():
    # sql/<entity>.sql holds the queries of that entity: a name says where its text is.
    wrong = [
        f"{q.source}: {name!r} does not start with {q.source.split('.sql')[0]!r}_"
        for name, q in registry().items()
        if not name.startswith(q.source.split(".sql")[0] + "_")
    ]
    assert wrong == []


def test_registry_skips_the_schema_dump(tmp_path: Path):
    (tmp_path / "a.sql").write_text("-- name: a_one :one\nSELECT 1\n")
    (tmp_path / queries.SNAPSHOT).write_text(
        "--\n-- Name: x; Type: TABLE\n--\nCREATE TABLE x (id int);\n"
    )
    assert list(registry(tmp_path)) == ["a_one"]
