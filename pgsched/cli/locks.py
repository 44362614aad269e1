"""``pgsched lock …``: distributed locks for commands (docs/limits.md, "Distributed
locks"): ``lock run NAME -- CMD…`` runs CMD while it holds the tenant's lock NAME on a
session of its own; ``lock list`` shows who holds and who waits."""

from __future__ import annotations

import signal
import subprocess
import sys
from types import FrameType

import click
import psycopg

from .. import db, locks
from .. import migrate as migrations
from ..errors import LockTimeout, PermissionDenied, PgschedError
from .output import print_json, table
from .root import Context, Seconds, main, pass_ctx

#: exit status when the lock was not got (sysexits.h EX_TEMPFAIL: try again later)
NOT_GOT = 75
#: seconds between the checks that the lock's session is still there while CMD runs
CHECK_EVERY = 5.0
#: seconds CMD is given to end after SIGTERM when the lock's session was lost
STOP_GRACE = 10.0


@main.group()
def lock() -> None:
    """Distributed locks: one holder of a name at a time across every host, per tenant.

    \b
    pgsched lock run nightly-report -- ./report.sh --full
    pgsched lock list

    Task code takes the same locks from Python (pgsched.locks) or SQL (docs/limits.md,
    "Distributed locks")."""


def _tenant(c: Context) -> str | None:
    return c.tenant if c.tenant_given else None  # else the login's own (the SQL resolves it)


@lock.command(
    "run",
    context_settings={"ignore_unknown_options": True},
    short_help="Run a command while holding lock NAME.",
    options_metavar="[--timeout SECONDS]",
)
@click.argument("name")
@click.argument(
    "command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- COMMAND [ARG]..."
)
@click.option(
    "--timeout",
    type=Seconds(0, 2_000_000),
    default=None,
    help="Seconds to wait for the lock (0: only try). Default: as long as it takes.",
)
@pass_ctx
def lock_run(c: Context, name: str, command: tuple[str, ...], timeout: float | None) -> None:
    """Run COMMAND while holding lock NAME, and exit with its status. COMMAND and its
    arguments come after -- (argv, no shell).

    Exits 75 without running it when the lock was not got within --timeout. The lock is
    held by this process's own database session and is released when COMMAND ends, or
    when this process dies, however it dies. SIGTERM and SIGHUP are passed on to COMMAND;
    Ctrl-C reaches it from the terminal. If the session is lost while COMMAND runs (the
    lock may then go to another), COMMAND is stopped (SIGTERM, then SIGKILL after 10 s)
    and the exit status is 1.
    """
    conn = db.connect(c.dsn, application_name="pgsched lock run")
    try:
        try:
            with db.Session(conn).transaction() as tx:
                migrations.require_current(tx)
        except PermissionDenied:
            pass  # an application's login: the SQL API alone, which the lock is
        try:
            locks.acquire(conn, name, timeout, tenant=_tenant(c))
        except LockTimeout as exc:
            click.echo(f"pgsched lock run: {exc}; {command[0]} was not run", err=True)
            sys.exit(NOT_GOT)
        status = _run_holding(conn, name, list(command))
        if not conn.broken:
            locks.release(conn, name, tenant=_tenant(c))
    finally:
        conn.close()
    sys.exit(status)


def _run_holding(conn: psycopg.Connection[db.Row], name: str, argv: list[str]) -> int:
    """Run ``argv`` to its end while checking the lock's session; its exit status
    (128 + N when killed by signal N, 127 when it could not be started)."""
    try:
        proc = subprocess.Popen(argv)
    except OSError as exc:
        click.echo(f"pgsched lock run: {argv[0]}: {exc.strerror or exc}", err=True)
        return 127

    def forward(signum: int, _frame: FrameType | None) -> None:
        proc.send_signal(signum)

    before = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
    before[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        while True:
            try:
                code = proc.wait(timeout=CHECK_EVERY)
                return 128 - code if code < 0 else code
            except subprocess.TimeoutExpired:
                pass
            try:
                db.Session(conn).one("lock_session_check")
            except PgschedError as exc:
                click.echo(
                    f"pgsched lock run: the session holding lock {name!r} was lost ({exc}); "
                    f"stopping {argv[0]}",
                    err=True,
                )
                proc.terminate()
                try:
                    proc.wait(timeout=STOP_GRACE)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                return 1
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@lock.command("list", short_help="The tenant's locks: who holds each and who waits.")
@click.option(
    "--all-tenants",
    is_flag=True,
    help="Every tenant's locks that this login may see (an installation-wide login: all).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def lock_list(c: Context, all_tenants: bool, as_json: bool) -> None:
    """The tenant's locks: who holds each and who waits, since when. PID is the PostgreSQL
    backend's of the holding session (pg_terminate_backend ends it, and its locks), not the
    process of `pgsched lock run`; EXECUTION_ID the execution whose handler holds it."""
    rows = c.db().many("lock_list", tenant="*" if all_tenants else _tenant(c))
    if as_json:
        print_json(rows)
        return
    table(
        [{**r, "state": "held" if r["granted"] else "waiting"} for r in rows],
        ["tenant", "name", "state", "pid", "execution_id", "waiting_since", "application_name"],
    )
