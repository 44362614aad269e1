"""A command's result (its last line of output) and how output lines are read."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime

import pytest

from pgsched.cli.dags import tree_lines
from pgsched.handlers.command import MAX_LINE_BYTES, _pump, command_result
from pgsched.handlers.output import LogSink
from pgsched.jsontext import has_nul


@pytest.mark.parametrize(
    ("line", "result"),
    [
        ('{"rows": 120}', {"rows": 120}),
        ("42", 42),
        ("true", True),
        ("  extracted 80 rows  ", "extracted 80 rows"),
        ("NaN", "NaN"),  # not JSON
        ("1e999", "1e999"),  # JSON, but infinite: PostgreSQL cannot store it
        ("[1, 1e999]", "[1, 1e999]"),
        ('"a\\u0000b"', '"a\\u0000b"'),  # jsonb refuses NUL characters
        ('"a\\\\u0000b"', "a\\u0000b"),  # the text backslash-u0000 is no NUL: it is JSON
        ('"a\\\\\\u0000b"', '"a\\\\\\u0000b"'),  # an escaped backslash, then a NUL
        ('"\\ud800"', '"\\ud800"'),  # a lone surrogate: not UTF-8
        (None, None),
    ],
)
def test_the_last_line_is_json_when_postgres_can_store_it_else_text(line, result):
    assert command_result(line) == result


@pytest.mark.parametrize(
    ("value", "nul"),
    [
        ("a\x00b", True),
        ("\\u0000", False),
        ("\\\x00", True),
        ("\\\\u0000", False),
        ("plain", False),
        ({"k\x00": 1}, True),
        (["\\u0000", "x"], False),
    ],
)
def test_has_nul_tells_a_nul_character_from_the_text_backslash_u0000(value, nul):
    assert has_nul(json.dumps(value)) is nul


LOGGED_AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def read(data: bytes) -> LogSink:
    sink = LogSink(now=lambda: LOGGED_AT)
    r, w = os.pipe()
    pump = threading.Thread(target=_pump, args=(os.fdopen(r, "rb"), "stdout", sink))
    pump.start()
    with os.fdopen(w, "wb") as out:
        out.write(data)
    pump.join(5)
    return sink


def test_a_last_line_longer_than_the_read_limit_is_no_result():
    sink = read(b'{"kind": "invoice"}\n' + b'{"pad": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}\n')
    assert sink.last_stdout is None
    lines = sink.drain()
    assert len(lines) == 3  # the long line is kept in the log, in two pieces
    assert {logged_at for _, _, logged_at, _ in lines} == {
        LOGGED_AT
    }  # the clock given, not the host's


def test_a_line_of_exactly_the_read_limit_is_whole():
    line = b'"' + b"y" * (MAX_LINE_BYTES - 3) + b'"\n'
    assert len(line) == MAX_LINE_BYTES
    assert command_result(read(line).last_stdout) == "y" * (MAX_LINE_BYTES - 3)


def test_a_chain_of_thousands_of_nodes_draws_without_recursion():
    nodes = [
        {
            "node_id": f"n{i}",
            "position": i,
            "upstream": [f"n{i - 1}"] if i else [],
            "state": "succeeded",
            "started_at": None,
            "duration_seconds": None,
            "error": None,
            "result": None,
        }
        for i in range(3000)
    ]
    lines = tree_lines(nodes)
    assert len(lines) == 3000
    assert max(len(line) for line in lines) < 200  # the indent stops growing
