"""``/metrics``: the Prometheus exposition of :mod:`pgsched.metrics`. A tenant's token
scrapes its tenant's series alone; an instance token (``pgsched token create --instance
--role viewer``) every tenant's and those that span tenants (the scheduler nodes and
workers, the roll-up, webhooks, clock offsets, old snapshots).

Scrapers authenticate like the API, with ``Authorization: Bearer <token>`` of a viewer
token (Prometheus: ``authorization: {credentials: pgs_…}`` in the scrape config). Without
one the answer is a plain 401, not the sign-in redirect pages get, because a scraper
cannot follow a login form.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from .. import metrics
from .access import database, principal, require


def scrape(request: Request) -> Response:
    if principal(request) is None:
        return PlainTextResponse(
            "401: a viewer token is needed (Authorization: Bearer <token>)\n",
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    who = require(request, "viewer")
    if who.instance:
        body, content_type = metrics.render(database(request), None, installation=True)
    else:
        body, content_type = metrics.render(database(request), who.tenant, installation=False)
    return Response(body, media_type=content_type)


routes = [Route("/metrics", scrape, methods=["GET"])]
