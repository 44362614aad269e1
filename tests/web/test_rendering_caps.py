"""Hostile JSON through real requests on a real database: bodies nested too deep or too
large are refused with the field named (422/413, never 500), and values already stored
(inserted directly, nested 10,000 deep or 200 KB long) render capped with a link to the
raw JSON."""

from __future__ import annotations

import json

from pgsched.web.api import MAX_DEPTH
from pgsched.web.preview import MAX_BYTES, preview
from pgsched.web.session import MAX_BODY

from ..factories import make_task
from .conftest import sign_in


def nested(depth: int) -> str:
    """A JSON list nested ``depth`` levels deep, as text."""
    return "[" * depth + "]" * depth


def test_params_nested_ten_thousand_deep_are_422_naming_the_field(api):
    client = api("operator")
    body = '{"name": "deep", "command": "true", "params": {"x": ' + nested(10_000) + "}}"
    refused = client.post(
        "/api/v1/tasks", content=body, headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == {
        "code": "validation",
        "message": f"params: nested deeper than {MAX_DEPTH} levels",
        "field": "params",
    }
    # deep enough to refuse though json.loads reads it: the same answer
    body = '{"name": "deep", "command": "true", "params": {"x": ' + nested(MAX_DEPTH) + "}}"
    refused = client.post(
        "/api/v1/tasks", content=body, headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "params"
    # a whole body that is one deep list names the body
    refused = client.post(
        "/api/v1/tasks", content=nested(5000), headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "body"
    # and a PATCH too
    assert client.post("/api/v1/tasks", json={"name": "ok", "command": "true"}).status_code == 201
    patch = client.patch(
        "/api/v1/tasks/ok",
        content='{"params": {"a": ' + nested(3000) + "}}",
        headers={"Content-Type": "application/json"},
    )
    assert patch.status_code == 422 and patch.json()["error"]["field"] == "params"
    # within the limit, it is stored
    fine = {"name": "fine", "command": "true", "params": {"x": json.loads(nested(MAX_DEPTH - 3))}}
    assert client.post("/api/v1/tasks", json=fine).status_code == 201


def test_a_body_over_the_limit_is_413_not_500(api):
    client = api("operator")
    huge = json.dumps({"name": "huge", "command": "true", "params": {"x": "a" * MAX_BODY}})
    refused = client.post(
        "/api/v1/tasks", content=huge, headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 413
    assert refused.json()["error"]["field"] is None
    assert refused.json()["error"]["code"] == "too_large"


def stored_execution(sql, task_id: int, params: str, result: str | None = None) -> int:
    """An ended execution whose params (and result) are the JSON text given, inserted
    directly into the history (no pgsched code reads or checks them on the way in)."""
    return sql.execute(
        "INSERT INTO pgsched.execution_history (id, task_id, scheduled_at, run_at, state,"
        " trigger, priority, queue, params, attempt, max_attempts, created_at, finished_at,"
        " result) SELECT nextval('pgsched.execution_id_seq'), %s, now(),"
        " now(), 'succeeded', 'manual', 5, 'default', %s::jsonb, 1, 1, now(), now(), %s::jsonb"
        " RETURNING id",
        (task_id, params, result),
    ).fetchone()["id"]


def test_values_stored_ten_thousand_deep_render_capped_not_500(db, sql, client, api, token_for):
    task = make_task(db, "deep-stored")
    ident = stored_execution(sql, task["id"], '{"x": ' + nested(10_000) + "}", nested(30))
    sign_in(client, token=token_for("viewer"))
    page = client.get(f"/executions/{ident}")
    assert page.status_code == 200, page.text[:500]
    assert page.text.count("Shown in part") == 2
    assert "nested deeper than can be read here" in page.text  # the params: too deep to load
    assert "nested deeper than 20 levels" in page.text  # the result: loaded, shown 20 deep
    assert f'<a href="/api/v1/executions/{ident}">Raw JSON</a>' in page.text
    (stored,) = (
        sql.execute(
            "SELECT octet_length(params::text) FROM pgsched.execution_history WHERE id = %s",
            (ident,),
        )
        .fetchone()
        .values()
    )
    assert f"the whole value is {stored} bytes" in page.text  # as PostgreSQL prints it
    assert len(page.text) < 3 * MAX_BYTES
    # the raw JSON: the API answers, the value too deep to parse given as its JSON text
    raw = api("viewer").get(f"/api/v1/executions/{ident}")
    assert raw.status_code == 200
    params = raw.json()["params"]
    assert isinstance(params, str)
    assert params.replace(" ", "") == '{"x":' + nested(10_000) + "}"
    assert raw.json()["result"] == json.loads(nested(30))


def test_a_large_value_shows_16_kib_and_its_size(db, sql, client, token_for):
    big = {"rows": [{"n": i, "text": "x" * 100} for i in range(2000)]}
    task = make_task(db, "big-params", params=big)
    ident = stored_execution(sql, task["id"], json.dumps(big))
    sign_in(client, token=token_for("viewer"))
    whole = len(json.dumps(big, separators=(",", ":")))
    for path, link in (
        (f"/executions/{ident}", f"/api/v1/executions/{ident}"),
        ("/tasks/big-params", "/api/v1/tasks/big-params"),
    ):
        page = client.get(path)
        assert page.status_code == 200
        assert f"longer than {MAX_BYTES} bytes): the whole value is {whole} bytes" in page.text
        assert f'<a href="{link}">Raw JSON</a>' in page.text
        assert len(page.text) < 3 * MAX_BYTES, path


def test_the_preview_never_recurses_and_says_what_it_left_out():
    deep: list = []
    cursor = deep
    for _ in range(50_000):  # far past Python's recursion limit
        cursor.append([])
        cursor = cursor[0]
    shown = preview({"a": deep})
    assert shown.truncated and shown.depth == 50_002
    assert "nested deeper than 20 levels" in shown.reason
    assert "a list of 1 item(s) deeper than 20 levels" in shown.text
    small = preview({"a": [1, 2]})
    assert not small.truncated and small.size == len('{"a":[1,2]}') and small.depth == 2
