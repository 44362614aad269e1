"""``pgsched import-crontab``: a crontab file imported as tasks (:mod:`pgsched.importer`),
and its report printed line by line."""

from __future__ import annotations

import shlex

import click

from .. import importer
from ..errors import PgschedError
from ..schedule import Schedule
from .output import print_json
from .root import Context, main, pass_ctx


@main.command("import-crontab")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--system",
    is_flag=True,
    help="System crontab (/etc/crontab, /etc/cron.d): has a user column, stored with each "
    "task; a worker that isolates its commands runs them as that user only when allowed "
    "(pgsched worker --allow-run-as USER), and fails them otherwise; without isolation it "
    "is not used.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what would be created (schedule, zone, user, command, "
    "stdin, environment), line by line; write nothing.",
)
@click.option(
    "--tz",
    "tz",
    help="IANA zone of entries without CRON_TZ (default: this machine's zone, "
    "which cron here uses).",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Delete tasks imported earlier from a file of this name whose "
    "line is gone or changed (as 'crontab FILE' replaces a table).",
)
@click.option(
    "--allow-problems",
    is_flag=True,
    help="Import the valid entries even when other "
    "lines are refused (exit 0); without it a file with a refused line imports nothing "
    "and exits 1.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def import_crontab(
    c: Context,
    file: str,
    system: bool,
    dry_run: bool,
    tz: str | None,
    replace: bool,
    allow_problems: bool,
    as_json: bool,
) -> None:
    """Import a crontab file: one task per entry; every other line is reported with its
    number and reason, and then nothing is imported and the exit status is 1 (as
    crontab(1) refuses a table with errors) unless --allow-problems. A '%' that looks
    meant as a date format (crontab(5): it ends the command) is warned about. Re-importing
    the same file changes nothing; tasks of lines that changed or went away are reported
    (deleted with --replace)."""
    if tz is not None:
        Schedule.parse("cron", "@daily", tz)  # a clear error for an unknown zone
    db = c.db()  # a dry run reads it too: what exists already, what --replace would delete
    report = importer.import_crontab(
        db,
        file,
        system=system,
        tenant=c.tenant,
        dry_run=dry_run,
        tz=tz,
        replace=replace,
        allow_problems=allow_problems,
    )
    _print_import(report, dry_run, as_json)
    problems = report.count("problem")
    if problems and not allow_problems:
        entries = report.count("would_create") + report.count("unchanged")
        raise PgschedError(
            f"import-crontab: {problems} line(s) of {file} refused (listed above)"
            + ("" if dry_run else "; nothing was imported")
            + f": fix them, or give --allow-problems to import the other {entries} "
            + ("entry" if entries == 1 else "entries")
        )


def _print_import(report: importer.ImportReport, dry_run: bool, as_json: bool) -> None:
    """The report of ``import-crontab``: line by line, then deletions, warnings and notes."""
    if as_json:
        print_json(importer.as_json(report))
    else:
        for line in report.lines:
            if line.action == "problem":
                click.echo(f"skipped {line.reason}")
            else:
                extra = (f" (user {line.user})" if line.user else "") + (
                    f" with {line.stdin.count(chr(10)) + 1} line(s) of stdin"
                    if line.stdin is not None
                    else ""
                )
                zone = "" if line.timezone == "UTC" else f" {line.timezone}"
                click.echo(
                    f"line {line.line_no}: {line.action.replace('_', ' ')} {line.task}  "
                    f"[{line.schedule}{zone}]{extra} {line.command}"
                )
                if dry_run and line.env:
                    click.echo(
                        "    env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in line.env.items())
                    )
                if dry_run and line.stdin is not None:
                    click.echo(f"    stdin: {line.stdin!r}")
        for name in report.deleted:
            click.echo(f"deleted {name} (its line is gone or changed)")
        for _, warning in report.warnings:
            click.echo(f"warning: {warning}")
        for note in report.notes:
            click.echo(f"note: {note}")
        click.echo(
            f"{report.count('created')} created, {report.count('unchanged')} unchanged, "
            f"{report.count('would_create')} would be created, {report.count('problem')} problem(s)"
        )
