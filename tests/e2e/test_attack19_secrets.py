"""Attack 19 on secrets by reference (issue 19, item 3), on real processes and real logins:
who decides which secret a task's attempt resolves. Each test asserts the secure outcome,
so it fails while the hole is open."""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import textwrap
from pathlib import Path

import pytest

from pgsched.db import Database
from pgsched.secret_keys import Keyring
from pgsched.stores import secrets as store

from ..helpers import cli, finished, wait_until
from ..tenancy import login, two_tenants

pytestmark = pytest.mark.e2e

WORKER = ("worker", "--concurrency", "2", "--poll-interval", "0.5", "--heartbeat-interval", "1")

# A task whose author references no secret at all: it "sends" what it is given (a mail, a
# chat message, a webhook's body), here to a file outside pgsched, where masking never looks.
MODULE = textwrap.dedent("""
    import os

    from pgsched import App

    app = App()

    @app.task()
    def send(body="", upstream=None, **_):
        if upstream:
            body = upstream["fetch"]["comment"]
        with open(os.environ["ATTACK19_OUTBOX"], "a") as f:
            f.write(body + "\\n")
        return {"sent": True}

    @app.task()
    def dump(pw):
        import json

        print(json.dumps({"config": {"password": pw}}))  # json.dumps' default: ensure_ascii
        return {}
""")


@pytest.fixture
def tenant_a(dsn):
    with two_tenants(dsn) as (a, _b, _roles):
        yield a


def _setup(dsn, tmp_path, tenant: str, value: str | None = None) -> tuple[str, str, dict[str, str]]:
    """Tenant ``tenant`` with secret ``smtp-pw``, a worker key, and the ``send`` module."""
    raw = os.urandom(32)
    value = value or "pw-" + secrets.token_hex(12)
    db = Database.connect(dsn, max_size=1)
    try:
        store.set_secret(db, Keyring([raw]), tenant, "smtp-pw", value)
    finally:
        db.close()
    (tmp_path / "a19tasks.py").write_text(MODULE)
    outbox = tmp_path / "outbox"
    outbox.write_text("")
    env = {"PGSCHED_SECRET_KEY": base64.b64encode(raw).decode(), "ATTACK19_OUTBOX": str(outbox)}
    return value, str(outbox), env


def test_attack19_an_application_login_cannot_make_a_task_resolve_a_secret_its_author_never_named(
    dsn, sql, start, tmp_path, tenant_a
):
    """The application login of A may enqueue A's tasks, with params of its choosing (end
    users' text often goes straight into them). Those params are not the task's author's:
    a ``{{secret:NAME}}`` in them must not be resolved, or any enqueuer (or any end user
    whose text reaches params) reads every secret of the tenant through whatever the task
    does with its params (here: sends them)."""
    a = tenant_a
    value, outbox, env = _setup(dsn, tmp_path, a.name)
    cli(dsn, "--tenant", a.name, "task", "create", "send", "--python", "a19tasks:send")
    start(*WORKER, "--tenant", a.name, "--pythonpath", str(tmp_path), env=env)
    with login(a.app) as c:
        row = c.execute(
            "SELECT * FROM pgsched.enqueue_v2('send', params => %s::jsonb, tenant => %s)",
            [json.dumps({"body": "hello {{secret:smtp-pw}}"}), a.name],
        ).fetchone()
        ident = next(iter(row.values()))
    finished(sql, ident)
    sent = Path(outbox).read_text()
    assert value not in sent, "an enqueuer's params resolved a secret the task never referenced"


def test_attack19_an_upstream_nodes_result_cannot_make_a_downstream_node_resolve_a_secret(
    dsn, sql, start, tmp_path, tenant_a
):
    """A DAG's upstream node returns data it fetched (an issue's comment, a web page): that
    data lands in the downstream node's params as ``upstream``. A ``{{secret:NAME}}`` in it
    must not be resolved: whoever writes the data the pipeline reads would read the
    tenant's secrets through the node that forwards it."""
    a = tenant_a
    value, outbox, env = _setup(dsn, tmp_path, a.name)
    comment = json.dumps({"comment": "nice tool {{secret:smtp-pw}}"})
    spec = {
        "name": "relay",
        "nodes": [
            {"id": "fetch", "command": f"echo '{comment}'"},
            {"id": "post", "python": "a19tasks:send", "depends_on": ["fetch"]},
        ],
    }
    path = tmp_path / "relay.json"
    path.write_text(json.dumps(spec))
    cli(dsn, "--tenant", a.name, "dag", "apply", str(path))
    start(*WORKER, "--tenant", a.name, "--pythonpath", str(tmp_path), env=env)
    run = json.loads(cli(dsn, "--tenant", a.name, "dag", "trigger", "relay", "--json").stdout)
    run_id = run.get("run_id") or run.get("id")
    wait_until(
        lambda: sql.execute(
            "SELECT state FROM pgsched.dag_run WHERE id = %s AND state NOT IN ('running', 'queued')",
            [run_id],
        ).fetchone(),
        timeout=60,
        message="the DAG run ends",
    )
    sent = Path(outbox).read_text()
    assert sent.strip(), "the downstream node ran"
    assert value not in sent, "an upstream result resolved a secret the node never referenced"


def test_attack19_a_non_ascii_secret_printed_with_json_dumps_is_masked(
    dsn, sql, start, tmp_path, tenant_a
):
    """docs/security.md says the JSON-escaped form of a value is masked ("a handler that
    prints json.dumps of it"). json.dumps escapes every non-ASCII character by default
    (ensure_ascii=True); the mask looks only for ensure_ascii=False's form, so a password
    with one accented letter, printed as a handler's config dump, is stored in the log."""
    a = tenant_a
    value = "pässwört-" + secrets.token_hex(8)
    value, _outbox, env = _setup(dsn, tmp_path, a.name, value)
    cli(dsn, "--tenant", a.name, "task", "create", "dump", "--python", "a19tasks:dump",
        "--params", '{"pw": "{{secret:smtp-pw}}"}')  # fmt: skip
    start(*WORKER, "--tenant", a.name, "--pythonpath", str(tmp_path), env=env)
    with login(a.app) as c:
        row = c.execute("SELECT * FROM pgsched.enqueue_v2('dump', tenant => %s)", [a.name])
        ident = next(iter(row.fetchone().values()))
    done = finished(sql, ident)
    assert done["state"] == "succeeded", done["error"]
    escaped = json.dumps(value)[1:-1]  # p\u00e4ssw\u00f6rt-...
    lines = [
        r["line"]
        for r in sql.execute(
            "SELECT line FROM pgsched.execution_log WHERE execution_id = %s", [ident]
        ).fetchall()
    ]
    assert lines, "it printed"
    assert [ln for ln in lines if escaped in ln] == [], lines


@pytest.fixture
def tenants_ab(dsn):
    with two_tenants(dsn) as (a, b, _roles):
        yield a, b


def test_attack19_a_worker_serving_two_tenants_gives_no_tenant_the_others_provider_secret(
    dsn, sql, start, tmp_path, tenants_ab
):
    """A worker started for A and B (``--tenant A --tenant B``, or ``--all-tenants``) with a
    provider secret meant for A's task (``PGSCHED_SECRET_ENV_A_TOKEN``): B's task author
    writes ``{{secret:env:A_TOKEN}}`` and gets it. docs/security.md only advises binding
    such workers to one tenant; nothing stops it. Secure outcome: B's reference does not
    resolve (providers scoped to a tenant, or refused on a worker serving several)."""
    a, b = tenants_ab
    _value, outbox, env = _setup(dsn, tmp_path, a.name)
    token = "tok-" + secrets.token_hex(12)
    cli(dsn, "--tenant", b.name, "task", "create", "grab",
        "--command", 'printf "%s\\n" "$X" >> "$ATTACK19_OUTBOX"',
        "--env", "X={{secret:env:A_TOKEN}}")  # fmt: skip
    worker = start(
        *WORKER,
        "--tenant",
        a.name,
        "--tenant",
        b.name,
        env={**env, "PGSCHED_SECRET_ENV_A_TOKEN": token},
    )
    try:  # refusing to start with a provider while serving two tenants is secure too
        worker.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass  # it runs: then B's reference must not resolve
    else:
        assert "secret providers (PGSCHED_SECRET_ENV_*, PGSCHED_SECRET_DIR)" in worker.output
        assert token not in worker.output
        return
    with login(b.app) as c:
        row = c.execute("SELECT * FROM pgsched.enqueue_v2('grab', tenant => %s)", [b.name])
        ident = next(iter(row.fetchone().values()))
    finished(sql, ident)
    assert token not in Path(outbox).read_text(), "tenant B read the provider secret meant for A"
