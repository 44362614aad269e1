"""Templates of the web admin: ``templates/web/*.html`` rendered with Jinja2 (autoescape
on for every template, whatever its name), with ``principal``, ``csrf_token``,
``csrf_field`` (the hidden input every POST form needs: ``{{ csrf_field }}``) and ``nav``
in every context, and the filters ``preview`` (a JSON value capped in size and depth:
:mod:`pgsched.web.preview`), ``text_preview`` (a long text cut) and ``size`` (bytes as
people read them: ``100 GB``, ``1.2 MB``, ``250 bytes``)."""

from __future__ import annotations

from typing import Any

import jinja2
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from ..limits import format_bytes
from ..resources import resource_dir
from .access import csrf_token, principal
from .preview import preview, text_preview

# (label, path) of the navigation bar in base.html
NAV = (
    ("Dashboard", "/"),
    ("Tasks", "/tasks"),
    ("Executions", "/executions"),
    ("DAGs", "/dags"),
    ("Dead letters", "/dlq"),
    ("Queues", "/queues"),
    ("Quotas", "/quotas"),
    ("Workers", "/workers"),
    ("Scheduler", "/scheduler"),
)
# the pages of NAV that span tenants: shown to instance principals only (they get 403)
INSTANCE_NAV = frozenset({"/workers", "/scheduler"})


def _context(request: Request) -> dict[str, Any]:
    token = csrf_token(request)
    who = principal(request)
    return {
        "principal": who,
        "csrf_token": token,
        "nav": [
            (label, path)
            for label, path in NAV
            if path not in INSTANCE_NAV or (who is not None and who.instance)
        ],
        "csrf_field": Markup('<input type="hidden" name="csrf_token" value="{}">').format(token),
    }


def size(n: float) -> str:
    """Bytes ``n`` as people read them: whole decimal units as ``pgsched`` writes a quota
    (``100 GB``; :func:`pgsched.limits.format_bytes`), else rounded (``1.2 MB``), or
    ``250 bytes``."""
    whole = int(n)
    exact = format_bytes(whole, " ") or ""
    if not exact.isdigit():
        return exact
    if whole < 1000:
        return f"{whole} bytes"
    return str(jinja2.filters.do_filesizeformat(whole))


def templates() -> Jinja2Templates:
    """The template set, loaded from the shipped ``templates/`` folder (names ``web/...``)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resource_dir("templates")),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["preview"] = preview
    env.filters["text_preview"] = text_preview
    env.filters["size"] = size
    return Jinja2Templates(env=env, context_processors=[_context])


def render(
    request: Request, name: str, context: dict[str, Any] | None = None, *, status_code: int = 200
) -> HTMLResponse:
    """Render template ``name`` (e.g. ``"web/tasks.html"``) with ``context`` plus
    ``request``, ``principal``, ``csrf_token``, ``csrf_field`` and ``nav``."""
    return request.app.state.templates.TemplateResponse(
        request, name, context or {}, status_code=status_code
    )
