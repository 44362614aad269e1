"""Terminal output and input parsing shared by the commands: JSON, aligned tables,
instants and JSON objects given as flags."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from ..errors import ValidationError
from ..jsontext import json_default
from ..schedule import parse_interval, parse_once


def print_json(data: Any) -> None:
    """``data`` as indented JSON, in UTF-8 as it is (a mask prints as ``••••••``, not
    ``\\u2022``): every command's ``--json``."""
    click.echo(json.dumps(data, default=json_default, indent=2, ensure_ascii=False))


def json_line(data: Any) -> str:
    """``data`` as one line of JSON, UTF-8 as :func:`print_json` (``execution logs --json``)."""
    return json.dumps(data, default=json_default, ensure_ascii=False)


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def print_fields(row: dict) -> None:
    """Print a row as aligned ``key value`` lines, leaving out empty values: the values
    start in one column, after the longest key shown (at least 18 characters in)."""
    shown = {k: v for k, v in row.items() if v not in (None, {}, [])}
    width = max([18, *(len(k) for k in shown)])
    for key, value in shown.items():
        click.echo(f"{key:{width}} {fmt(value)}")


def table(rows: list[dict], columns: list[str]) -> None:
    """Print ``rows`` as aligned columns (the header is the column names, upper-cased).
    A value over 60 characters is cut to 57 and "..." except in the last column, which
    nothing follows (a wait reason, an error), printed whole."""
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    cells = [[_cut(v) for v in row[:-1]] + row[-1:] for row in cells]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def _cut(value: str) -> str:
    """A table cell of at most 60 characters."""
    return value if len(value) <= 60 else value[:57] + "..."


def parse_when(
    value: str | None, field: str, tz: str = "UTC", *, now: Callable[[], datetime]
) -> datetime | None:
    """An ISO 8601 instant (without an offset: read in ``tz``), or ``+30s`` / ``+5m`` from
    ``now()`` (the database's clock, ``Database.now``: only called for such a value).
    Raises ValidationError naming ``field``."""
    if value is None:
        return None
    try:
        if value.startswith("+"):
            return now().replace(microsecond=0) + timedelta(seconds=parse_interval(value[1:]))
        return parse_once(value, tz)
    except ValidationError as exc:
        if (
            "does not exist in" in exc.reason
        ):  # a local time the clocks skip: say so, not "no timestamp"
            raise ValidationError(field, value, exc.reason) from None
        raise ValidationError(
            field,
            value,
            "is not an ISO 8601 timestamp or +DURATION like +30s (durations up to 3650 days)",
        ) from None
    except OverflowError:
        raise ValidationError(field, value, "is out of range") from None


def parse_json_object(value: str | None, field: str) -> dict | None:
    if value is None:
        return None
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValidationError(field, value, f"is not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValidationError(field, value, "must be a JSON object like '{\"key\": 1}'")
    return data


def pairs(values: tuple[str, ...], field: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise ValidationError(field, item, "must be NAME=VALUE")
        out[key] = val
    return out
