"""The dashboard at ``/``. A placeholder until the dashboard page is built: it shows who is
signed in and links to the other pages."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .access import require
from .rendering import render


def dashboard(request: Request) -> Response:
    require(request, "viewer")
    return render(request, "web/dashboard.html")


routes = [Route("/", dashboard, methods=["GET"], name="dashboard")]
