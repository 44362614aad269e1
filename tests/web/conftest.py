"""Fixtures for the web admin and API: the app over the test database, a client, and
signed-in clients per role (tokens and users made by the real credential functions)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from starlette.testclient import TestClient

from pgsched.db import Database
from pgsched.web.app import create_app
from pgsched.web.credentials import create_token

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    """The CSRF token in a rendered form."""
    match = _CSRF.search(html)
    assert match, "no csrf_token field in the page"
    return match.group(1)


@pytest.fixture
def app(db: Database):
    return create_app(db)


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as c:
        yield c


@pytest.fixture
def token_for(db: Database) -> Callable[..., str]:
    """``token_for(role, tenant="default", name="", instance=False, may_reveal=False)``: a
    new API token (``may_reveal``: it reads sensitive values, migration 0036)."""

    def make(
        role: str,
        tenant: str = "default",
        name: str = "",
        instance: bool = False,
        may_reveal: bool = False,
    ) -> str:
        return create_token(
            db, role=role, tenant=tenant, name=name, instance=instance, may_reveal=may_reveal
        )[0]

    return make


@pytest.fixture
def api(app, token_for) -> Callable[..., TestClient]:
    """``api(role, tenant="default", instance=False, may_reveal=False)``: a client sending
    that role's Bearer token (``instance``: of the instance scope; ``may_reveal``: it reads
    sensitive values)."""
    clients: list[TestClient] = []

    def make(
        role: str, tenant: str = "default", instance: bool = False, may_reveal: bool = False
    ) -> TestClient:
        token = token_for(role, tenant, instance=instance, may_reveal=may_reveal)
        c = TestClient(app, follow_redirects=False, headers={"Authorization": f"Bearer {token}"})
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def sign_in(client: TestClient, **fields: str):
    """Post the login form (with the page's CSRF token); the response."""
    page = client.get("/login")
    return client.post("/login", data={"csrf_token": csrf_of(page.text), **fields})
