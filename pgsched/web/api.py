"""What every REST API endpoint shares: JSON answers, reading the body and the query
string with errors that name the field, and cursor paging.

Lists answer ``{"items": [...], "next_cursor": "..." | null}``; pass ``cursor`` back to
get the next page. Bad input is a 400 (not JSON) or 422 (a field) in the one error shape
of :mod:`pgsched.web.errors`, never a 500.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..jsontext import json_default
from .access import body
from .errors import ApiError
from .preview import nesting

PREFIX = "/api/v1"
MAX_ID = 2**63 - 1  # ids are PostgreSQL bigints
MAX_DEPTH = 64  # levels of nesting of a JSON body (the object itself is the first)


class ApiResponse(JSONResponse):
    """JSON with instants as ISO 8601 (UTC) and text as UTF-8."""

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, default=json_default, ensure_ascii=False, separators=(",", ":")
        ).encode()


def reply(data: Any, status: int = 200) -> ApiResponse:
    return ApiResponse(data, status_code=status)


def page(items: list[dict[str, Any]], limit: int, key: str) -> ApiResponse:
    """A page of ``items`` (``limit + 1`` were asked for: one more means there is a next
    page, whose cursor is the ``key`` of the last item shown)."""
    more = len(items) > limit
    items = items[:limit]
    return reply({"items": items, "next_cursor": str(items[-1][key]) if more and items else None})


def json_object(request: Request, *, required: bool = True) -> dict[str, Any]:
    """The request body as a JSON object (``{}`` when empty and not ``required``).
    Raises ApiError 400 (not JSON) or 422 (not an object, or a field nested deeper than
    MAX_DEPTH levels, named)."""
    raw = body(request)
    if not raw.strip():
        if required:
            raise ApiError(422, "body: a JSON object is required", field="body")
        return {}
    try:
        value = json.loads(raw)
    except RecursionError:  # json.loads gives up near 1,000 levels
        field = _too_deep(raw)
        raise ApiError(
            422, f"{field}: nested deeper than {MAX_DEPTH} levels", field=field
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"body: not valid JSON ({exc})", field="body") from None
    if not isinstance(value, dict):
        raise ApiError(
            422, f"body: must be a JSON object, not {type(value).__name__}", field="body"
        )
    for key, item in value.items():
        if nesting(item) >= MAX_DEPTH:  # the body's own object is the first level
            raise ApiError(422, f"{key}: nested deeper than {MAX_DEPTH} levels", field=str(key))
        _storable(str(key), item)
    return value


_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}:]')


def _too_deep(raw: bytes) -> str:
    """The top-level field of the JSON object ``raw`` where nesting passes MAX_DEPTH
    (``body`` when it is not inside one), read by a scan of its brackets (json.loads could
    not read it)."""
    depth, key, last = 0, "body", b""
    for token in _JSON_TOKEN.finditer(raw):
        text = token.group()
        if text in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                return key
        elif text in (b"]", b"}"):
            depth -= 1
        elif text == b":":
            if depth == 1:
                try:
                    key = str(json.loads(last))
                except ValueError:
                    key = "body"
        else:
            last = text
    return key


def _storable(field: str, value: Any) -> None:
    """ApiError 422 naming ``field`` when ``value`` holds text PostgreSQL cannot store: a NUL
    character or a lone UTF-16 surrogate (JSON allows both as escapes)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _storable(field, key)
            _storable(field, item)
    elif isinstance(value, list):
        for item in value:
            _storable(field, item)
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(
                422,
                f"{field}: {value[:50]!r} holds a lone surrogate, not valid Unicode",
                field=field,
            ) from None
        if "\x00" in value:
            raise ApiError(422, f"{field}: {value[:50]!r} contains a NUL character", field=field)


def only_fields(data: dict[str, Any], allowed: set[str] | frozenset[str]) -> None:
    """ApiError 422 naming the first field of ``data`` not in ``allowed``."""
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ApiError(
            422,
            f"{unknown[0]}: unknown field (known: {', '.join(sorted(allowed))})",
            field=unknown[0],
        )


def text_arg(request: Request, name: str, *, max_length: int = 200) -> str | None:
    """Query parameter ``name`` (None when absent or empty); ApiError 422 when too long or
    holding a NUL character."""
    value = request.query_params.get(name)
    if not value:
        return None
    if len(value) > max_length or "\x00" in value:
        raise ApiError(
            422,
            f"{name}: {value[:50]!r} must be at most {max_length} characters without NUL",
            field=name,
        )
    return value


def int_arg(request: Request, name: str, default: int | None, low: int, high: int) -> int | None:
    """Query parameter ``name`` as an integer in [low, high]; ApiError 422 otherwise."""
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    return bounded_int(name, value, low, high)


def bounded_int(name: str, value: object, low: int, high: int) -> int:
    """``value`` (text or int) as an integer in [low, high]; ApiError 422 naming ``name``."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value.strip()):
        number = int(value)
    if number is None or not low <= number <= high:
        raise ApiError(
            422, f"{name}: {str(value)[:50]!r} must be an integer from {low} to {high}", field=name
        )
    return number


def choice_arg(request: Request, name: str, choices: tuple[str, ...]) -> str | None:
    value = request.query_params.get(name)
    if not value:
        return None
    if value not in choices:
        raise ApiError(
            422, f"{name}: {value[:50]!r} must be one of {', '.join(choices)}", field=name
        )
    return value


def time_arg(request: Request, name: str) -> datetime | None:
    """Query parameter ``name`` as an instant (see :func:`instant`), None when absent."""
    value = request.query_params.get(name)
    return instant(name, value) if value else None


def instant(name: str, value: object) -> datetime:
    """``value``, an ISO 8601 instant (UTC when it has no offset), as an aware datetime;
    ApiError 422 naming ``name`` otherwise."""
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is not None and moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # years 1 and 9999 are refused: shifted to UTC they may leave Python's range
    if moment is None or not 2 <= moment.year <= 9998:
        raise ApiError(
            422,
            f"{name}: {str(value)[:50]!r} is not an ISO 8601 instant (years 2 to 9998)",
            field=name,
        )
    return moment


def id_param(request: Request, name: str = "id") -> int:
    """Path parameter ``name`` as a positive bigint; ApiError 404 otherwise (no such row)."""
    value = str(request.path_params[name])
    if not value.isdigit() or not 1 <= int(value) <= MAX_ID:
        raise ApiError(404, f"{name}: {value[:30]!r} is not the id of a row", field=name)
    return int(value)
