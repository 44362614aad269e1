"""The CLI shows what the database shows its login (issue 19, item 4; migration 0031): a
tenant's web login, which may not read sensitive values, gets masks from `task show`,
`task list --json`, `execution show` and `dag show`; the installation's login gets the
values; `task update --sensitive-param` marks a key, and an update that sends a mask back
keeps the secret; so does what `task update --json` prints."""

from __future__ import annotations

import json
import uuid

from pgsched.db import Database
from pgsched.masking import MASK
from pgsched.stores import tenants

from ..helpers import cli
from ..tenancy import drop_roles, login_dsn

SECRETS = ("hunter2-env", "tok-param-1", "cust-marked-3", "run-secret-4", "dag-env-5")


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_the_cli_shows_masks_to_a_login_that_may_not_read_them_and_values_to_one_that_may(
    dsn, tmp_path
):
    tag = uuid.uuid4().hex[:8]
    tenant, web = f"acme_{tag}", f"acme_web_{tag}"
    db = Database.connect(dsn, max_size=2)
    try:
        tenants.create(db, tenant, logins=((web, "web"),))
    finally:
        db.close()
    try:
        t = ("--tenant", tenant)
        cli(dsn, *t, "task", "create", "job", "--command", "true",
            "--env", f"DB_PASSWORD={SECRETS[0]}",
            "--params", json.dumps({"api_token": SECRETS[1], "customer": SECRETS[2], "n": 7}),
            "--sensitive-param", "customer")  # fmt: skip
        run = json.loads(
            cli(
                dsn,
                *t,
                "task",
                "trigger",
                "job",
                "--params",
                json.dumps({"secret": SECRETS[3]}),
                "--json",
            ).stdout
        )["execution_id"]
        dag = tmp_path / "etl.json"
        dag.write_text(
            json.dumps(
                {"name": "etl", "nodes": [{"id": "a", "command": "true", "env": {"K": SECRETS[4]}}]}
            )
        )
        cli(dsn, *t, "dag", "apply", str(dag))
        viewer = login_dsn(dsn, web)
        commands = [
            ("task", "show", "job"),
            ("task", "show", "job", "--json"),
            ("task", "list", "--json"),
            ("execution", "show", str(run), "--json"),
            ("dag", "show", "etl", "--json"),
        ]
        for command in commands:
            out = cli(viewer, *command).stdout
            assert _leaks(out) == [], command
        shown = json.loads(cli(viewer, "task", "show", "job", "--json").stdout)
        assert shown["env"] == {"DB_PASSWORD": MASK}
        assert shown["params"] == {"api_token": MASK, "customer": MASK, "n": 7}
        revealed = "".join(cli(dsn, *t, *command).stdout for command in commands)
        assert _leaks(revealed) == list(SECRETS)
        # the viewer's own copy, masks and all, sent back by the viewer: the secrets stay, and
        # what the update prints is masked too
        sent = json.dumps({**shown["params"], "n": 8})
        answer = cli(viewer, "task", "update", "job", "--env", f"DB_PASSWORD={MASK}",
                     "--params", sent, "--json").stdout  # fmt: skip
        assert _leaks(answer) == [] and json.loads(answer)["params"]["n"] == 8
        stored = json.loads(cli(dsn, *t, "task", "show", "job", "--json").stdout)
        assert stored["env"] == {"DB_PASSWORD": SECRETS[0]}
        assert stored["params"] == {"api_token": SECRETS[1], "customer": SECRETS[2], "n": 8}
        assert stored["sensitive_params"] == ["customer"]
    finally:
        drop_roles(dsn, [web])
