"""The limits' commands (``pgsched queue …``, ``tenant quota …``, the task options of
issue 18, ``status`` and ``execution show``), run in process against a real database:
what they print, their ``--json``, what they store, and one-line errors naming the field."""

from __future__ import annotations

import json

import psycopg
from click.testing import CliRunner
from psycopg.rows import dict_row

from pgsched.cli import main
from pgsched.db import Database

from ..tenancy import two_tenants
from .test_claim import register


def run(dsn: str, *args: str, ok: bool = True):
    result = CliRunner().invoke(main, ["--dsn", dsn, *args])
    if ok:
        assert result.exit_code == 0, result.output
    return result


def one(dsn: str, query: str, *params):
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as c:
        return c.execute(query, params).fetchone()


def test_queue_pause_list_show_set_and_resume(dsn):
    run(dsn, "task", "create", "report", "--command", "true", "--queue", "reports")
    run(dsn, "task", "trigger", "report")
    said = run(dsn, "queue", "pause", "reports", "--reason", "vendor maintenance").output
    assert said.startswith("queue reports (tenant default): paused since ")
    assert said.rstrip().endswith(": vendor maintenance; limits: none")
    listed = run(dsn, "queue", "list").output.splitlines()
    assert listed[0].split() == [
        "NAME", "STATE", "MAX_RUNNING", "RATE", "RUNNING", "READY", "WAITING", "WORKERS",
        "PAUSED_BY", "PAUSE_REASON",
    ]  # fmt: skip
    assert listed[1].split()[:8] == ["reports", "paused", "-", "-", "0", "1", "1", "0"]
    rows = json.loads(run(dsn, "queue", "list", "--json").output)
    assert [(r["name"], r["waiting"], r["pause_reason"]) for r in rows] == [
        ("reports", 1, "vendor maintenance")
    ]
    said = run(dsn, "queue", "set", "reports", "--max-running", "4", "--rate-limit", "60/1m")
    assert "limits: max_running 4, rate 60/1m" in said.output
    shown = json.loads(run(dsn, "queue", "show", "reports", "--json").output)
    assert (shown["max_running"], shown["rate_limit"], shown["rate_period_seconds"]) == (4, 60, 60)
    text = run(dsn, "queue", "show", "reports").output
    fields = dict(line.split(None, 1) for line in text.splitlines())
    assert (fields["rate"], fields["state"]) == ("60/1m", "paused")
    # the values start in one column, past the longest key (rate_period_seconds)
    assert {len(line) - len(line.split(None, 1)[1]) for line in text.splitlines()} == {20}
    run(dsn, "queue", "set", "reports", "--max-running", "none")
    said = run(dsn, "queue", "resume", "reports", "--json").output
    assert json.loads(said)["paused_at"] is None
    stored = one(dsn, "SELECT * FROM pgsched.queue WHERE name = 'reports'")
    assert (stored["max_running"], stored["rate_limit"], stored["paused_at"]) == (None, 60, None)


def test_queue_commands_refuse_bad_input_in_one_line(dsn):
    for args, message in [
        (["queue", "set", "q", "--rate-limit", "60"], "rate_limit: '60' must be N/PERIOD"),
        (["queue", "set", "q", "--max-running", "0"], "max_running: '0' must be an integer"),
        (["queue", "set", "q"], "nothing to change"),
        (["queue", "pause", "bad queue"], "queue: 'bad queue' must be 1-64 characters"),
        (["queue", "show", "quiet"], "queue: no queue 'quiet' in tenant 'default'"),
    ]:
        result = run(dsn, *args, ok=False)
        assert result.exit_code == 1, (args, result.output)
        assert result.output.startswith("Error: ") and message in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    assert one(dsn, "SELECT count(*) AS n FROM pgsched.queue")["n"] == 0


def quota_table(said: str) -> dict[str, list[str]]:
    """``tenant quota show``'s table: quota -> [used, limit, state] (state empty: none)."""
    head, *lines = said.splitlines()[1:]
    assert head.split() == ["QUOTA", "USED", "LIMIT", "STATE"]
    cols = [head.index(c) for c in ("USED", "LIMIT", "STATE")]
    return {
        line[: cols[0]].strip(): [
            line[a:b].strip() for a, b in zip(cols, [*cols[1:], None], strict=True)
        ]
        for line in lines
        if not line.startswith("held by")
    }


def test_quota_show_labels_a_tenant_at_its_quota_at_quota_and_past_it_over(dsn):
    run(dsn, "tenant", "create", "acme")
    run(dsn, "tenant", "quota", "set", "acme", "--max-running", "0", "--max-starts-per-hour", "2")
    sql = "UPDATE pgsched.tenant_usage SET hour_starts = %s, "
    sql += "hour_start = date_trunc('hour', now(), 'UTC') WHERE tenant = 'acme'"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql, [5])
    said = run(dsn, "tenant", "quota", "show", "acme").output
    rows = quota_table(said)
    assert rows["executions at once"] == ["0", "0", "at quota"]  # at it: work waits
    assert rows["starts this hour (UTC)"] == ["5", "2", "over"]  # past it
    assert rows["compute minutes this month (UTC)"] == ["0.0", "50000", "ok"]  # the default
    assert said.splitlines()[-1] == (
        "held by max_running, max_starts_per_hour: its new work waits until its use is below "
        "the quota"
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql, [1])
    rows = quota_table(run(dsn, "tenant", "quota", "show", "acme").output)
    assert rows["starts this hour (UTC)"] == ["1", "2", "ok"]


def test_tenant_quota_show_and_set(dsn):
    run(dsn, "tenant", "create", "acme")
    said = run(
        dsn,
        "tenant", "quota", "set", "acme", "--max-running", "50", "--max-starts-per-hour", "none",
        "--max-log-bytes", "1GB", "--weight", "3",
    ).output  # fmt: skip
    assert said.splitlines()[0] == "tenant acme (weight 3)"
    rows = quota_table(said)
    assert rows["executions at once"] == ["0", "50", "ok"]
    assert rows["starts this hour (UTC)"] == ["0", "none", ""]
    assert rows["bytes of stored logs"] == ["0", "1GB", "ok"]
    quotas = json.loads(run(dsn, "tenant", "quota", "show", "acme", "--json").output)
    assert (quotas["max_running"], quotas["max_starts_per_hour"], quotas["weight"]) == (50, None, 3)
    assert quotas["max_log_bytes"] == 10**9 and quotas["over"] == []
    # the tenant of the context when none is given
    assert (
        json.loads(run(dsn, "--tenant", "acme", "tenant", "quota", "show", "--json").output)[
            "tenant"
        ]
        == "acme"
    )
    bad = run(dsn, "tenant", "quota", "set", "acme", "--max-log-bytes", "lots", ok=False)
    assert bad.exit_code == 1 and "max_log_bytes: 'lots' must be a size" in bad.output
    bad = run(dsn, "tenant", "quota", "set", "acme", "--weight", "0", ok=False)
    assert bad.exit_code == 1 and "weight: '0' must be an integer from 1 to 100" in bad.output
    bad = run(dsn, "tenant", "quota", "set", "acme", "--weight", "none", ok=False)
    assert bad.exit_code == 1 and "weight: 'none' must be an integer" in bad.output
    stored = one(dsn, "SELECT * FROM pgsched.tenant WHERE name = 'acme'")
    assert (stored["max_running"], stored["max_log_bytes"], stored["weight"]) == (50, 10**9, 3)


def test_a_tenants_login_reads_its_quotas_and_may_not_set_them(dsn):
    with two_tenants(dsn) as (a, b, _):
        own = json.loads(run(a.engine, "tenant", "quota", "show", "--json").output)
        assert own["tenant"] == a.name
        refused = run(a.engine, "tenant", "quota", "set", a.name, "--max-running", "1000", ok=False)
        assert refused.exit_code == 1 and "quotas are the installation's to set" in refused.output
        other = run(a.engine, "tenant", "quota", "show", b.name, ok=False)
        assert other.exit_code == 1 and "acts for tenant" in other.output
        paused = run(a.engine, "queue", "pause", "default", "--json").output
        assert json.loads(paused)["paused_by"] == f"login {a.roles[1]}"


def test_task_limit_options_are_stored_and_removed(dsn):
    run(
        dsn,
        "task", "create", "import", "--command", "true", "--max-running", "2",
        "--rate-limit", "60/1m", "--concurrency-key", "customer:{customer_id}",
        "--key-max-running", "1", "--key-rate-limit", "5/10s",
    )  # fmt: skip
    row = one(dsn, "SELECT * FROM pgsched.task WHERE name = 'import'")
    assert (row["max_running"], row["rate_limit"], row["rate_period_seconds"]) == (2, 60, 60)
    assert (row["concurrency_key"], row["key_max_running"]) == ("customer:{customer_id}", 1)
    assert (row["key_rate_limit"], row["key_rate_period_seconds"]) == (5, 10)
    shown = json.loads(run(dsn, "task", "show", "import", "--json").output)
    assert shown["max_running"] == 2 and shown["concurrency_key"] == "customer:{customer_id}"
    run(dsn, "task", "update", "import", "--max-running", "none", "--rate-limit", "none")
    run(dsn, "task", "update", "import", "--key-max-running", "none", "--key-rate-limit", "none")
    run(dsn, "task", "update", "import", "--concurrency-key", "")
    row = one(dsn, "SELECT * FROM pgsched.task WHERE name = 'import'")
    assert [
        row[k] for k in ("max_running", "rate_limit", "concurrency_key", "key_max_running")
    ] == [None] * 4
    for args, message in [
        (["--key-max-running", "1"], "key_max_running: 1 needs a concurrency_key"),
        (["--rate-limit", "1/0s"], "rate_limit: '1/0s' must have a period from 0.001 seconds"),
        (["--max-running", "many"], "max_running: 'many' must be an integer"),
    ]:
        bad = run(dsn, "task", "create", "t2", "--command", "true", *args, ok=False)
        assert bad.exit_code == 1 and message in bad.output, bad.output
    assert one(dsn, "SELECT count(*) AS n FROM pgsched.task WHERE name = 't2'")["n"] == 0


def test_status_shows_paused_queues_and_tenants_at_a_quota(dsn):
    run(dsn, "task", "create", "job", "--command", "true")
    run(dsn, "task", "trigger", "job")
    run(dsn, "queue", "pause", "default", "--reason", "deploy")
    run(dsn, "tenant", "quota", "set", "default", "--max-running", "0")
    text = run(dsn, "status").output
    assert "queue 'default' of tenant 'default' is paused since " in text
    assert ": deploy (1 ready wait; pgsched --tenant default queue resume default)" in text
    assert "tenant 'default' runs 0 of its 0 at once: its work waits" in text
    data = json.loads(run(dsn, "status", "--json").output)
    assert [(q["name"], q["pause_reason"]) for q in data["paused_queues"]] == [
        ("default", "deploy")
    ]
    assert [(t["tenant"], t["at"]) for t in data["tenants_at_quota"]] == [
        ("default", ["max_running"])
    ]
    run(dsn, "queue", "resume", "default")
    run(dsn, "tenant", "quota", "set", "default", "--max-running", "none")
    text = run(dsn, "status").output
    assert "is paused" not in text and "its work waits" not in text


def test_execution_show_says_which_limit_holds_a_pending_execution(dsn):
    run(dsn, "task", "create", "job", "--command", "true")
    ident = str(json.loads(run(dsn, "task", "trigger", "job", "--json").output)["execution_id"])
    shown = json.loads(run(dsn, "execution", "show", ident, "--json").output)
    assert shown["state"] == "pending"
    assert shown["wait_reason"] == "no running worker serves queue default of tenant default"
    run(dsn, "queue", "pause", "default", "--reason", "vendor maintenance")
    text = run(dsn, "execution", "show", ident).output
    assert "wait_reason        queue default is paused: vendor maintenance" in text
    shown = json.loads(run(dsn, "execution", "show", ident, "--json").output)
    assert shown["wait_reason"] == "queue default is paused: vendor maintenance"


def test_execution_list_says_which_limit_holds_each_pending_execution(dsn):
    """A newcomer's finding: only ``execution show`` said why a run waits. The listing
    gains a wait_reason column when a limit holds a listed run, and the field in JSON."""
    run(dsn, "task", "create", "job", "--command", "true")
    first = json.loads(run(dsn, "task", "trigger", "job", "--json").output)["execution_id"]
    listed = json.loads(run(dsn, "execution", "list", "--json").output)
    unserved = "no running worker serves queue default of tenant default"
    assert [(r["id"], r["wait_reason"]) for r in listed] == [(first, unserved)]
    text = run(dsn, "execution", "list").output
    assert text.splitlines()[1].endswith(unserved)  # the last column, not cut at 60
    db = Database.connect(dsn, max_size=1)
    try:
        register(db)  # a live worker serves the queue: nothing holds the run
    finally:
        db.close()
    listed = json.loads(run(dsn, "execution", "list", "--json").output)
    assert [(r["id"], r["wait_reason"]) for r in listed] == [(first, None)]
    assert "WAIT_REASON" not in run(dsn, "execution", "list").output  # no column for nothing
    run(dsn, "queue", "pause", "default", "--reason", "vendor maintenance")
    second = json.loads(run(dsn, "task", "trigger", "job", "--json").output)["execution_id"]
    listed = json.loads(run(dsn, "execution", "list", "--json").output)
    why = "queue default is paused: vendor maintenance"
    assert [(r["id"], r["wait_reason"]) for r in listed] == [(second, why), (first, why)]
    lines = run(dsn, "execution", "list").output.splitlines()
    assert lines[0].split()[-1] == "WAIT_REASON"
    assert all(line.endswith(why) for line in lines[2:]), lines


def test_a_queue_nothing_uses_is_said_new_on_pause_and_set_and_cannot_be_resumed(dsn):
    """A mistyped name (a newcomer's finding): pause and set make the queue, as they may
    before its work comes, and say so; resume of a queue there is none of is an error."""
    for args in (["queue", "pause", "reprots"], ["queue", "set", "reprts", "--max-running", "3"]):
        said = run(dsn, *args)
        both = said.output + (said.stderr if said.stderr_bytes is not None else "")
        assert "note: queue 'repr" in both and "has no limits, work or worker yet" in both
    gone = run(dsn, "queue", "resume", "nosuch", ok=False)
    assert gone.exit_code == 1 and "no queue 'nosuch' in tenant 'default'" in gone.output
    assert one(dsn, "SELECT count(*) AS n FROM pgsched.queue WHERE name = 'nosuch'")["n"] == 0
    run(dsn, "task", "create", "r", "--command", "true", "--queue", "reports")
    run(dsn, "task", "trigger", "r")
    quiet = run(dsn, "queue", "pause", "reports")
    assert "note:" not in quiet.output + (quiet.stderr if quiet.stderr_bytes is not None else "")


def test_concurrency_key_none_removes_the_key_and_its_limits_and_a_broken_template_is_refused(
    dsn,
):
    run(
        dsn,
        "task", "create", "imp", "--command", "true", "--concurrency-key", "c:{id}",
        "--key-max-running", "1", "--key-rate-limit", "5/10s",
    )  # fmt: skip
    run(dsn, "task", "update", "imp", "--concurrency-key", "none")
    row = one(dsn, "SELECT * FROM pgsched.task WHERE name = 'imp'")
    assert [row[k] for k in ("concurrency_key", "key_max_running", "key_rate_limit")] == [None] * 3
    for template in ("c:{id", "c:}", "c:{}", "c:{a{b}}"):
        bad = run(dsn, "task", "update", "imp", "--concurrency-key", template, ok=False)
        assert bad.exit_code == 1 and "concurrency_key: " in bad.output, bad.output
        assert "each brace closed" in bad.output
    assert one(dsn, "SELECT concurrency_key FROM pgsched.task WHERE name = 'imp'") == {
        "concurrency_key": None
    }


def test_a_concurrency_key_without_a_key_limit_is_warned_about(dsn):
    """A newcomer's finding: --concurrency-key alone was taken silently and limited
    nothing. It is still taken (a key limit may follow), with a warning on stderr, which
    goes once a key limit counts by it."""
    made = run(dsn, "task", "create", "imp", "--command", "true", "--concurrency-key", "c:{id}")
    warning = "warning: task imp: concurrency key 'c:{id}' limits nothing until --key-max-running"
    assert warning in made.stderr and warning not in made.stdout
    assert one(dsn, "SELECT concurrency_key FROM pgsched.task")["concurrency_key"] == "c:{id}"
    limited = run(dsn, "task", "update", "imp", "--key-max-running", "1")
    assert "warning" not in limited.stderr and "(key_max_running)" in limited.stdout
    unlimited = run(dsn, "task", "update", "imp", "--key-max-running", "none")
    assert warning in unlimited.stderr


def test_task_update_names_only_what_changed(dsn):
    """A newcomer's finding: ``task update --command`` on a command task said it changed
    handler_kind too (the field is implied by the option, and was already shell)."""
    run(dsn, "task", "create", "job", "--command", "true")
    said = run(dsn, "task", "update", "job", "--command", "echo hi").stdout
    assert said.startswith("updated task job (command);"), said
    said = run(dsn, "task", "update", "job", "--argv", '["true"]').stdout
    assert said.startswith("updated task job (argv, handler_kind);"), said
    said = run(dsn, "task", "update", "job", "--argv", '["true"]').stdout
    assert said.startswith("updated task job (no change);"), said


def test_a_rate_periods_bounds_are_the_databases(dsn):
    """``queue set --rate-limit`` takes a period from 0.001 s to 366 days, as
    queue_set_limits_v1 (migration 0024) does, and says so alike at either end."""
    run(dsn, "task", "create", "job", "--command", "true")
    for text, seconds in (("1/0.001s", 0.001), ("1/366d", 366 * 86400.0), ("5/0.5s", 0.5)):
        shown = json.loads(
            run(dsn, "queue", "set", "default", "--rate-limit", text, "--json").stdout
        )
        assert shown["rate_period_seconds"] == seconds, text
    for text in ("1/0.0009s", "1/366d1s", "1/0s"):
        bad = run(dsn, "queue", "set", "default", "--rate-limit", text, ok=False)
        assert bad.exit_code == 1, text
        assert bad.output.strip().splitlines()[-1] == (
            f"Error: rate_limit: {text!r} must have a period from 0.001 seconds (1 ms) to 366 "
            "days (31622400 seconds)"
        ), bad.output
    with psycopg.connect(dsn, autocommit=True) as conn:
        for seconds, ok in ((0.001, True), (366 * 86400, True), (0.0009, False), (31622401, False)):
            try:
                conn.execute(
                    "SELECT pgsched.queue_set_limits_v1('default', rate_limit => 1, "
                    "rate_period_seconds => %s, tenant => 'default')",
                    [seconds],
                )
                took = True
            except psycopg.errors.InvalidParameterValue:
                took = False
            assert took is ok, seconds


def test_the_limits_commands_help_reads_and_their_listings_take_json():
    def helped(*args: str) -> str:
        result = CliRunner().invoke(main, [*args, "--help"])
        assert result.exit_code == 0, result.output
        return result.output

    for group in (("queue",), ("tenant", "quota"), ("lock",), ("alert",)):
        commands = helped(*group).split("Commands:")[1]
        assert "..." not in commands, commands  # no summary cut short
    for listing in (
        ("queue", "list"),
        ("queue", "show"),
        ("tenant", "quota", "show"),
        ("lock", "list"),
        ("alert", "list"),
    ):
        assert "--json" in helped(*listing), listing
    lock_run = helped("lock", "run")
    assert "lock run [--timeout SECONDS] NAME -- COMMAND [ARG]..." in lock_run
    assert "``" not in lock_run
    assert "--limit N   At most N alerts." in helped("alert", "list")
    assert "PERIOD from 0.001 s to 366 days" in " ".join(helped("queue", "set").split())
