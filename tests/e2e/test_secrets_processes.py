"""Secrets by reference on real processes (issue 19, item 3): ``pgsched secret set`` seals a
value read from standard input, a real worker resolves ``{{secret:NAME}}`` into a command's
environment and a Python task's params, and the value is then nowhere in the database (every
row of every table outside PostgreSQL's own schemas, cast to text, searched for the value and
for its hex) nor in the worker's own log, while the captured output shows the mask. A reference that
does not resolve fails the execution at once, naming the reference, and is not retried."""

from __future__ import annotations

import base64
import http.cookiejar
import json
import os
import secrets
import subprocess
import sys
import textwrap
import urllib.request

import pytest
from psycopg import sql as pgsql

from pgsched.db import Database
from pgsched.secret_keys import key_id
from pgsched.secret_refs import Reference, mask_text
from pgsched.stores import tasks
from pgsched.web.server import free_port

from ..helpers import Process, cli, fetch, finished, trigger, wait_until

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import json
    from pgsched import App

    app = App()

    @app.task()
    def show(url, plain):
        print("url is", url)
        print(json.dumps({"url": url}))
        return {"url": url, "plain": plain}

    @app.task()
    def leak_error(url):
        raise ValueError("cannot reach " + url)

    @app.task()
    def secret_variables():
        import os
        return sorted(k for k in os.environ if k.startswith("PGSCHED_SECRET"))
""")

WORKER = ("worker", "--concurrency", "2", "--poll-interval", "0.5", "--heartbeat-interval", "1")
MASK = mask_text(Reference("db", "sales-db-url"))


def _secret_set(dsn: str, name: str, value: str, env: dict[str, str]) -> str:
    """``pgsched secret set NAME`` with the value on standard input (never in argv)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pgsched", "secret", "set", name],
        input=value + "\n",
        capture_output=True,
        text=True,
        env={**os.environ, "PGSCHED_DSN": dsn, **env},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _rows_holding(sql, needle: str) -> list[str]:
    """Every table of the database outside PostgreSQL's own schemas (pgsched's two and any
    other; partitions included) with a row whose text form holds ``needle`` or its hex
    (bytea is shown as hex): ``schema.table`` names."""
    tables = sql.execute(
        "SELECT c.oid::regclass::text AS rel FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname <> 'information_schema' "
        "AND n.nspname NOT LIKE 'pg\\_%%' ORDER BY 1"
    ).fetchall()
    assert len(tables) > 20  # the search covers the schemas, not a few tables
    hexed = needle.encode().hex()
    found = []
    for t in tables:
        hit = sql.execute(
            pgsql.SQL(
                "SELECT count(*) AS n FROM {} r WHERE strpos(r::text, %s) > 0 "
                "OR strpos(r::text, %s) > 0"
            ).format(pgsql.SQL(t["rel"])),
            [needle, hexed],
        ).fetchone()
        if hit["n"]:
            found.append(t["rel"])
    return found


def _web_answers(dsn: str, tmp_path, ids: dict[str, int]) -> dict[str, str]:
    """What a real ``pgsched web`` answers about these executions and their tasks: the API
    (each execution, its logs, the task lists, /metrics) with a viewer token, and the pages
    (each execution's, each task's, the lists, the dashboard) signed in with it."""
    token = cli(dsn, "token", "create", "--role", "viewer").stdout.strip()
    # a port of its own: another test's web on the same port would answer for another database
    port = free_port("127.0.0.1", 20000 + secrets.randbelow(20000))
    web = Process(dsn, "web", "--port", str(port), log_dir=tmp_path)
    base = f"http://127.0.0.1:{port}"
    answers = {}
    try:
        wait_until(lambda: fetch(base + "/login")[0] == 200, timeout=30, message="web answers")
        assert web.proc.poll() is None, web.output  # and it is this one that answers
        api = ["/api/v1/tasks", "/api/v1/executions", "/metrics"]
        for ident in ids.values():
            api += [f"/api/v1/executions/{ident}", f"/api/v1/executions/{ident}/logs"]
        for url in api:
            status, body = fetch(base + url, token)
            assert status == 200, (url, status, body)
            answers[url] = body
        browser = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        link = urllib.request.Request(
            f"{base}/login?token={token}", headers={"Sec-Fetch-Site": "none"}
        )
        with browser.open(link, timeout=10) as page:
            assert page.url.endswith("/")
        pages = ["/", "/tasks", "/executions", "/dlq"]
        pages += [f"/executions/{ident}" for ident in ids.values()]
        pages += [f"/tasks/{name}" for name in ids]
        for url in pages:
            with browser.open(base + url, timeout=10) as page:
                answers[url] = page.read().decode()
    finally:
        web.stop()
    return answers


def _log(sql, ident: int) -> list[str]:
    return [
        r["line"]
        for r in sql.execute(
            "SELECT line FROM pgsched.execution_log WHERE execution_id = %s ORDER BY seq", [ident]
        ).fetchall()
    ]


def test_a_resolved_secret_is_nowhere_in_the_database_and_masked_in_output(
    dsn, sql, start, tmp_path
):
    value = "pw-" + secrets.token_hex(12)
    key = base64.b64encode(os.urandom(32)).decode()
    (tmp_path / "sectasks.py").write_text(MODULE)
    said = _secret_set(dsn, "sales-db-url", value, {"PGSCHED_SECRET_KEY": key})
    assert "created in tenant default" in said
    # the search finds the value where it is: a decoy row shows it can
    sql.execute("CREATE TABLE pgsched.decoy (line text)")
    sql.execute("INSERT INTO pgsched.decoy VALUES (%s)", [f"x{value}x"])
    assert _rows_holding(sql, value) == ["pgsched.decoy"]
    sql.execute("DROP TABLE pgsched.decoy")

    ref = "{{secret:sales-db-url}}"
    cli(
        dsn, "task", "create", "echo", "--argv",
        '["sh", "-c", "echo url=$DATABASE_URL; echo $DATABASE_URL >&2; echo $DATABASE_URL"]',
        "--env", f"DATABASE_URL={ref}",
    )  # fmt: skip
    cli(
        dsn, "task", "create", "inside", "--command", 'echo "$URL"',
        "--env", f"URL=postgresql://app:{ref}@db/app",
    )  # fmt: skip
    cli(
        dsn, "task", "create", "show", "--python", "sectasks:show",
        "--params", f'{{"url": "{ref}", "plain": "not a secret"}}',
    )  # fmt: skip
    cli(
        dsn, "task", "create", "leak_error", "--python", "sectasks:leak_error",
        "--params", f'{{"url": "{ref}"}}',
    )  # fmt: skip
    worker = start(*WORKER, "--pythonpath", str(tmp_path), env={"PGSCHED_SECRET_KEY": key})
    ids = {name: trigger(dsn, name) for name in ("echo", "inside", "show", "leak_error")}
    done = {name: finished(sql, ident) for name, ident in ids.items()}

    assert done["echo"]["state"] == "succeeded", done["echo"]["error"]
    # it ran with the value (stdout and stderr are read apart: their lines may interleave)
    assert sorted(_log(sql, ids["echo"])) == sorted([f"url={MASK}", MASK, MASK])
    assert done["echo"]["result"] == MASK  # the last line of output is its result
    assert done["inside"]["state"] == "succeeded"
    assert _log(sql, ids["inside"]) == [f"postgresql://app:{MASK}@db/app"]
    assert done["show"]["state"] == "succeeded", done["show"]["error"]
    assert _log(sql, ids["show"]) == [f"url is {MASK}", f'{{"url": "{MASK}"}}']
    assert done["show"]["result"] == {"url": MASK, "plain": "not a secret"}
    assert done["leak_error"]["state"] == "dead"
    assert done["leak_error"]["error"] == f"ValueError: cannot reach {MASK}"

    # the references are what stays: params and env as written
    row = sql.execute("SELECT params FROM pgsched.execution_history WHERE id = %s", [ids["show"]])
    assert row.fetchone()["params"]["url"] == ref
    assert _rows_holding(sql, value) == []
    answers = _web_answers(dsn, tmp_path, ids)
    assert [url for url, body in answers.items() if value in body] == []
    assert MASK in answers[f"/api/v1/executions/{ids['echo']}/logs"]
    assert MASK in answers[f"/executions/{ids['show']}"]  # the page shows the output, masked
    # the key was wiped from what /proc shows of the worker (root reads it whatever the
    # worker's dumpability), its name left
    with open(f"/proc/{worker.proc.pid}/environ", "rb") as f:
        environ = f.read()
    assert b"PGSCHED_SECRET_KEY=" in environ and key.encode() not in environ
    worker.stop()
    assert value not in worker.output
    assert MASK in worker.output  # its log of the failed attempt, masked
    assert "secrets: keys " + key_id(base64.b64decode(key)) in worker.output


def test_a_reference_that_does_not_resolve_fails_at_once_naming_it(dsn, sql, start, tmp_path):
    key = base64.b64encode(os.urandom(32)).decode()
    _secret_set(dsn, "there", "v-" + secrets.token_hex(8), {"PGSCHED_SECRET_KEY": key})
    for name, env in (
        ("missing", "X={{secret:nope}}"),
        ("typo", "X=placeholder"),
        ("no_provider", "X={{secret:env:TOKEN}}"),
    ):
        cli(dsn, "task", "create", name, "--command", "echo ran", "--max-attempts", "3",
            "--env", env)  # fmt: skip
    # the CLI refuses a malformed reference (tests/e2e/test_newcomer19_cli.py); the API's
    # store takes it, and the worker must fail it all the same
    db = Database.connect(dsn, max_size=1)
    try:
        tasks.update(db, "typo", {"env": {"X": "{{secret:has space}}"}})
    finally:
        db.close()
    start(*WORKER, env={"PGSCHED_SECRET_KEY": key})
    for name, says in (
        ("missing", "secret reference {{secret:nope}}: no secret 'nope' in tenant 'default'"),
        ("typo", "secret reference {{secret:has space}}: is not a reference"),
        ("no_provider", "started without PGSCHED_SECRET_ENV_TOKEN"),
    ):
        ident = trigger(dsn, name)
        row = finished(sql, ident)
        assert row["state"] == "dead" and row["attempt"] == 1, row
        assert says in row["error"], row["error"]
        assert _log(sql, ident) == []  # nothing ran


def test_a_worker_without_a_key_fails_stored_references_and_runs_the_rest(
    dsn, sql, start, tmp_path
):
    key = base64.b64encode(os.urandom(32)).decode()
    _secret_set(dsn, "db", "v-" + secrets.token_hex(8), {"PGSCHED_SECRET_KEY": key})
    folder = tmp_path / "secrets"
    folder.mkdir()
    provided = "file-" + secrets.token_hex(8)
    (folder / "api-token").write_text(provided + "\n")
    cli(dsn, "task", "create", "stored", "--command", "echo $X", "--env", "X={{secret:db}}")
    cli(dsn, "task", "create", "filed", "--command", 'echo "$X"; env',
        "--env", "X={{secret:file:api-token}}", "--env", "Y={{secret:env:TOKEN}}")  # fmt: skip
    (tmp_path / "sectasks.py").write_text(MODULE)
    cli(dsn, "task", "create", "variables", "--python", "sectasks:secret_variables")
    worker = start(
        *WORKER,
        "--pythonpath",
        str(tmp_path),
        env={"PGSCHED_SECRET_DIR": str(folder), "PGSCHED_SECRET_ENV_TOKEN": "tok-" + key[:8]},
    )
    row = finished(sql, trigger(dsn, "stored"))
    assert row["state"] == "dead" and "has no secret key (PGSCHED_SECRET_KEY" in row["error"]
    ident = trigger(dsn, "filed")
    row = finished(sql, ident)
    assert row["state"] == "succeeded", row["error"]
    lines = _log(sql, ident)
    assert lines[0] == mask_text(Reference("file", "api-token"))
    assert f"Y={mask_text(Reference('env', 'TOKEN'))}" in lines
    # the worker's own secret variables reach no command, nor a Python task's os.environ
    assert not [ln for ln in lines if ln.startswith("PGSCHED_SECRET")]
    assert finished(sql, trigger(dsn, "variables"))["result"] == []
    assert _rows_holding(sql, provided) == [] and _rows_holding(sql, "tok-" + key[:8]) == []
    worker.stop()
    assert provided not in worker.output


def test_the_cli_sets_lists_and_deletes_and_needs_a_key(dsn, sql, tmp_path):
    value = "v-" + secrets.token_hex(8)
    key_file = tmp_path / "keys"
    new, old = os.urandom(32), os.urandom(32)
    key_file.write_text(f"{base64.b64encode(new).decode()}\n{base64.b64encode(old).decode()}\n")
    refused = cli(dsn, "secret", "set", "api", check=False, env={"PGSCHED_SECRET_KEY": ""})
    assert refused.returncode == 1 and "no key to seal with" in refused.stderr
    said = _secret_set(dsn, "api", value, {"PGSCHED_SECRET_KEY_FILE": str(key_file)})
    assert said.strip().endswith(f"(key {key_id(new)})")
    assert "replaced" in _secret_set(dsn, "api", value, {"PGSCHED_SECRET_KEY_FILE": str(key_file)})
    listed = json.loads(cli(dsn, "secret", "list", "--json").stdout)
    assert [(r["name"], r["key_id"]) for r in listed] == [("api", key_id(new))]
    assert value not in cli(dsn, "secret", "list").stdout
    cli(dsn, "secret", "delete", "api")
    gone = cli(dsn, "secret", "delete", "api", check=False)
    assert gone.returncode == 1 and "no secret 'api' in tenant 'default'" in gone.stderr
    assert cli(dsn, "secret", "list", "--json").stdout.strip() == "[]"
