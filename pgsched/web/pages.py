"""What every admin page shares: keyset pages of a listing, the redirect after an action
(POST, then redirect, then GET: a reload never repeats the action) and the notice it
shows, and reading a submitted form's fields.

A listing asks for ``limit + 1`` rows ordered by a unique key; when the extra row came
back there is a next page, which starts after the last row shown (``?before=KEY`` or
``?after=KEY``, the other filters kept). Paging by key stays as fast on the last page of
a million rows as on the first, unlike ``OFFSET``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse

from ..errors import NotFound, ValidationError
from .access import form
from .api import MAX_ID

PAGE_SIZE = 50

# What ?done=... on a page says, and where its number links to (None: nowhere). Keys
# only, never text from the address bar: a link cannot make the admin display words of
# someone else's choosing.
NOTICES: dict[str, tuple[str, str | None]] = {
    "triggered": ("Triggered: execution {id} is queued.", "/executions/{id}"),
    "run_started": ("Started DAG run {id}.", None),
    "paused": ("Paused: the schedule stops firing (queued executions still run).", None),
    "resumed": ("Resumed: the next fire is planned from now.", None),
    "deleted": ("Deleted. Its history stays.", None),
    "created": ("Created.", None),
    "fixed": ("Saved: its schedule is computed again and the task is resumed.", None),
    "updated": ("Saved.", None),
    "cancelled": ("Cancelled.", None),
    "cancelling": ("Cancel requested: the worker is stopping it.", None),
    "finished": ("It had already ended; nothing was changed.", None),
    "requeued": ("Execution {id} is queued again with fresh attempts.", "/executions/{id}"),
    "retried": ("Retried as a new execution.", None),
    "retried_all": ("Retried {id} dead execution(s).", None),
    "removed": ("Removed from the dead-letter queue.", None),
    "password_changed": ("Password changed: every other session of yours has ended.", None),
    "user_signed_out": ("Signed out everywhere: the user's sessions have ended.", None),
    "queue_paused": ("Queue paused: claims take nothing from it (what runs goes on).", None),
    "queue_resumed": ("Queue resumed: its workers are woken.", None),
    "secret_created": ("Secret set: tasks may reference it now.", None),
    "secret_replaced": ("Secret replaced: attempts from now on get the new value.", None),
    "secret_deleted": ("Secret deleted: tasks that reference it fail from now on.", None),
}


@dataclass
class Notice:
    """The message an action's redirect shows, with an optional link to what it made."""

    text: str
    href: str | None = None


@dataclass
class Page:
    """One page of a listing: ``rows`` to show, and the address of the next page (None on
    the last)."""

    rows: list[dict[str, Any]]
    next_url: str | None


def keyset(
    request: Request, rows: list[dict[str, Any]], limit: int, key: str, param: str = "before"
) -> Page:
    """The page of ``rows`` (``limit + 1`` were fetched, ordered by ``key``): the next
    page's address is this one's with ``param`` set to the last shown row's ``key``."""
    more = len(rows) > limit
    shown = rows[:limit]
    if not (more and shown):
        return Page(shown, None)
    query = {k: v for k, v in request.query_params.items() if k not in (param, "done", "id") and v}
    query[param] = str(shown[-1][key])
    return Page(shown, f"{request.url.path}?{urlencode(query)}")


def notice(request: Request) -> Notice | None:
    """The message of ``?done=KEY`` (with ``?id=N`` filled in), or None."""
    found = NOTICES.get(request.query_params.get("done", ""))
    if found is None:
        return None
    number = request.query_params.get("id", "")
    number = number if number.isdigit() else "?"
    text, href = found
    return Notice(
        text.format(id=number), href.format(id=number) if href and number != "?" else None
    )


def done(path: str, what: str, number: int | None = None) -> RedirectResponse:
    """Redirect (303, so the browser GETs) to ``path`` showing notice ``what``."""
    query = {"done": what, **({"id": str(number)} if number is not None else {})}
    separator = "&" if "?" in path else "?"
    return RedirectResponse(f"{path}{separator}{urlencode(query)}", status_code=303)


def field(request: Request, name: str, *, required: bool = True, max_length: int = 10_000) -> str:
    """Form field ``name`` of the submitted form, stripped. Raises ValidationError naming
    it when it is missing (and ``required``), too long, or holds a NUL character."""
    value = form(request).get(name)
    text = value.strip() if isinstance(value, str) else ""
    if required and not text:
        raise ValidationError(name, text, "is required")
    if len(text) > max_length or "\x00" in text:
        raise ValidationError(
            name, text[:50], f"must be at most {max_length} characters without NUL"
        )
    return text


def int_field(request: Request, name: str, low: int = 0, high: int = 2**63 - 1) -> int:
    """Form field ``name`` as an integer in [low, high]. Raises ValidationError."""
    text = field(request, name, max_length=20)
    if not text.lstrip("-").isdigit() or not low <= int(text) <= high:
        raise ValidationError(name, text, f"must be an integer from {low} to {high}")
    return int(text)


def path_id(request: Request, what: str) -> int:
    """Path parameter ``id`` as a positive bigint. Raises NotFound (no such ``what``)."""
    value = str(request.path_params["id"])
    if not value.isdigit() or not 1 <= int(value) <= MAX_ID:
        raise NotFound(f"{what}: {value[:30]!r} is not the id of a row")
    return int(value)
