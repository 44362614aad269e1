"""``pgsched token …`` and ``pgsched user …`` against the test database."""

from __future__ import annotations

import json

from click.testing import CliRunner

from pgsched.cli import main
from pgsched.web.credentials import authenticate_token, authenticate_user


def run(dsn: str, *args: str, input: str | None = None):
    result = CliRunner().invoke(main, ["--dsn", dsn, *args], input=input, catch_exceptions=False)
    return result


def test_token_create_list_revoke(dsn, db):
    made = run(
        dsn,
        "token",
        "create",
        "--role",
        "operator",
        "--tenant",
        "acme",
        "--name",
        "deploy",
        "--json",
    )
    assert made.exit_code == 0, made.output
    created = json.loads(made.output)
    assert (
        created["token"].startswith("pgs_")
        and created["tenant"] == "acme"
        and created["role"] == "operator"
    )
    who = authenticate_token(db, created["token"])
    assert who is not None and (who.role, who.tenant, who.name) == ("operator", "acme", "deploy")

    listed = json.loads(run(dsn, "--tenant", "acme", "token", "list", "--json").output)
    assert [t["id"] for t in listed] == [created["id"]] and "token" not in listed[0]
    assert json.loads(run(dsn, "token", "list", "--json").output) == []  # tenant default has none

    plain = run(dsn, "token", "create", "--role", "viewer")
    assert plain.exit_code == 0 and plain.output.splitlines()[0].startswith("pgs_")

    assert run(dsn, "token", "revoke", str(created["id"])).exit_code == 0
    assert authenticate_token(db, created["token"]) is None
    missing = run(dsn, "token", "revoke", "999999")
    assert missing.exit_code == 1 and "no token 999999" in missing.output
    bad = run(dsn, "token", "create", "--role", "root")
    assert bad.exit_code == 2 and "root" in bad.output


def test_user_create_reads_the_password_from_stdin(dsn, db):
    made = run(
        dsn,
        "user",
        "create",
        "grace",
        "--role",
        "admin",
        "--tenant",
        "navy",
        "--password-stdin",
        input="hopper-1906\n",
    )
    assert made.exit_code == 0, made.output
    who = authenticate_user(db, "grace", "hopper-1906")
    assert who is not None and (who.role, who.tenant) == ("admin", "navy")
    again = run(
        dsn, "user", "create", "grace", "--role", "viewer", "--password-stdin", input="another-pw\n"
    )
    assert again.exit_code == 1 and "username: 'grace' is taken" in again.output
    short = run(
        dsn, "user", "create", "linus", "--role", "viewer", "--password-stdin", input="short\n"
    )
    assert short.exit_code == 1 and "password" in short.output
    listed = json.loads(run(dsn, "user", "list", "--all-tenants", "--json").output)
    assert [(u["username"], u["tenant"]) for u in listed] == [("grace", "navy")]
    assert "password_hash" not in listed[0]
    assert json.loads(run(dsn, "user", "list", "--json").output) == []  # tenant default has none
    assert run(dsn, "user", "delete", "grace").exit_code == 0
    assert authenticate_user(db, "grace", "hopper-1906") is None
    assert run(dsn, "user", "delete", "grace").exit_code == 1


def test_task_tags_from_the_command_line(dsn, db):
    assert (
        run(
            dsn, "task", "create", "tagged", "--command", "true", "--tags", "etl, nightly"
        ).exit_code
        == 0
    )
    assert db.one("task_get", name="tagged", tenant="default")["tags"] == ["etl", "nightly"]
    assert run(dsn, "task", "update", "tagged", "--tags", "").exit_code == 0
    assert db.one("task_get", name="tagged", tenant="default")["tags"] == []
    bad = run(dsn, "task", "create", "badtag", "--command", "true", "--tags", "no spaces")
    assert bad.exit_code == 1 and "tags: 'no spaces'" in bad.output


def test_instance_tokens_and_users_are_made_only_when_asked_for(dsn, db):
    made = json.loads(run(dsn, "token", "create", "--role", "admin", "--instance", "--json").output)
    assert made["instance"] is True
    who = authenticate_token(db, made["token"])
    assert who is not None and who.instance and who.tenant == "default"
    plain = json.loads(run(dsn, "token", "create", "--role", "admin", "--json").output)
    assert plain["instance"] is False and not authenticate_token(db, plain["token"]).instance
    out = run(
        dsn,
        "user",
        "create",
        "ops",
        "--role",
        "admin",
        "--instance",
        "--password-stdin",
        input="operations-1\n",
    )
    assert out.exit_code == 0 and "instance scope" in out.output, out.output
    user = authenticate_user(db, "ops", "operations-1")
    assert user is not None and user.instance
    listed = json.loads(run(dsn, "user", "list", "--json").output)
    assert [(u["username"], u["instance"]) for u in listed] == [("ops", True)]
